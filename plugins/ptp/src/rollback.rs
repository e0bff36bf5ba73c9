//! Undo actions for a half-done ADD, run newest first.

/// A stack of undo closures. [`Rollback::run`] runs them in reverse order
/// of registration; [`Rollback::commit`] forgets them.
#[derive(Default)]
pub struct Rollback<'a> {
    undo: Vec<Box<dyn FnOnce() + 'a>>,
}

impl<'a> Rollback<'a> {
    /// An empty stack.
    pub fn new() -> Self {
        Rollback { undo: Vec::new() }
    }

    /// Registers an undo action.
    pub fn push(&mut self, f: impl FnOnce() + 'a) {
        self.undo.push(Box::new(f));
    }

    /// Runs every undo action, newest first.
    pub fn run(mut self) {
        while let Some(f) = self.undo.pop() {
            f();
        }
    }

    /// Success: nothing is undone.
    pub fn commit(mut self) {
        self.undo.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;

    #[test]
    fn runs_in_reverse_and_commit_forgets() {
        let log = RefCell::new(Vec::new());
        let mut rb = Rollback::new();
        for i in 0..3 {
            let log = &log;
            rb.push(move || log.borrow_mut().push(i));
        }
        rb.run();
        assert_eq!(*log.borrow(), vec![2, 1, 0]);
        let mut rb = Rollback::new();
        rb.push(|| log.borrow_mut().push(9));
        rb.commit();
        assert_eq!(*log.borrow(), vec![2, 1, 0]);
    }
}
