//! DEL (and GC) run every step, whatever an earlier one did, and report
//! every failure (as netavark's error list): [`Teardown`] collects the
//! steps' outcomes into the one CNI error the runtime sees. Here, below
//! both, so that the plugins (bridge, ptp, the link plugins, host-device,
//! sbr, bandwidth's GC) and `cni-fw`'s masquerade teardown collect their
//! errors the one way.

use crate::CniError;

/// The outcomes of a teardown's steps, each of which ran.
#[derive(Debug, Default)]
#[must_use = "a teardown's errors are reported by `finish`"]
pub struct Teardown {
    first: Option<CniError>,
}

impl Teardown {
    /// The outcomes of steps that all ran, in order.
    pub fn of(results: impl IntoIterator<Item = Result<(), CniError>>) -> Teardown {
        let mut t = Teardown::default();
        for r in results {
            t.step(r);
        }
        t
    }

    /// One step's outcome.
    pub fn step(&mut self, result: Result<(), CniError>) {
        if let Err(e) = result {
            self.fail(e);
        }
    }

    /// One step's failure.
    pub fn fail(&mut self, e: CniError) {
        match &mut self.first {
            None => self.first = Some(e),
            Some(f) => {
                f.msg.push_str("; ");
                f.msg.push_str(&e.msg);
            }
        }
    }

    /// `Ok` when every step succeeded, else one error with the first
    /// failure's code and details and every failure's message, in order,
    /// joined with `"; "`.
    pub fn finish(self) -> Result<(), CniError> {
        self.first.map_or(Ok(()), Err)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_failure_is_reported_with_the_first_ones_code() {
        assert_eq!(Teardown::default().finish(), Ok(()));
        assert_eq!(Teardown::of([Ok(()), Ok(())]).finish(), Ok(()));
        let mut t = Teardown::of([
            Ok(()),
            Err(CniError::new(11, "ipam busy", "retry")),
            Err(CniError::internal("link")),
        ]);
        t.step(Ok(()));
        t.fail(CniError::new(7, "rules", "ignored"));
        let e = t.finish().unwrap_err();
        assert_eq!(
            (e.code, e.msg.as_str(), e.details.as_str()),
            (11, "ipam busy; link; rules", "retry")
        );
        // One failure is reported as it was.
        let one = CniError::new(4, "only", "this");
        assert_eq!(Teardown::of([Err(one.clone())]).finish(), Err(one));
    }
}
