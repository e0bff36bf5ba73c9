//! Undo actions of a half-done ADD, run in reverse order on failure, so a
//! failed ADD leaves nothing behind (bridge and ptp).

use cni_skel::CniError;

type Undo<'a> = Box<dyn FnOnce() -> Result<(), CniError> + 'a>;

/// A stack of undo actions.
#[derive(Default)]
pub struct Rollback<'a> {
    undo: Vec<(&'static str, Undo<'a>)>,
}

impl<'a> Rollback<'a> {
    /// Remembers how to undo a step.
    pub fn push(&mut self, what: &'static str, f: impl FnOnce() -> Result<(), CniError> + 'a) {
        self.undo.push((what, Box::new(f)));
    }

    /// Number of pending undo actions.
    pub fn len(&self) -> usize {
        self.undo.len()
    }

    /// True when nothing is to be undone.
    pub fn is_empty(&self) -> bool {
        self.undo.is_empty()
    }

    /// Runs every undo action, newest first; failures are logged, not
    /// returned (the ADD's own error is what the runtime must see).
    pub fn run(mut self) {
        while let Some((what, f)) = self.undo.pop() {
            if let Err(e) = f() {
                log::warn!("rollback: {what}: {}", e.msg);
            }
        }
    }

    /// Success: forget the undo actions.
    pub fn disarm(mut self) {
        self.undo.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;

    #[test]
    fn runs_in_reverse_and_continues_after_errors() {
        let log = RefCell::new(Vec::new());
        let mut rb = Rollback::default();
        rb.push("a", || {
            log.borrow_mut().push("a");
            Ok(())
        });
        rb.push("b", || {
            log.borrow_mut().push("b");
            Err(CniError::internal("boom"))
        });
        rb.push("c", || {
            log.borrow_mut().push("c");
            Ok(())
        });
        assert_eq!(rb.len(), 3);
        rb.run();
        assert_eq!(*log.borrow(), vec!["c", "b", "a"]);
    }

    #[test]
    fn disarmed_does_nothing() {
        let ran = RefCell::new(false);
        let mut rb = Rollback::default();
        rb.push("x", || {
            *ran.borrow_mut() = true;
            Ok(())
        });
        rb.disarm();
        assert!(!*ran.borrow());
    }
}
