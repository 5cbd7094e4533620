//! [`Shutdown`]: the signal that stops a group of tasks, the one kind the transport
//! (`transport/shared.rs`, every connection task), the node's own tasks (`NodeTasks`)
//! and the node's runtime (src/node/drive/inputs.rs; its handle trips it) stop on.
//! Tripped once, asked, awaited; a child also counts as tripped once its parent is, so
//! one part of a group can be retired alone. A [`TripOnDrop`] trips it when its holder
//! goes: a dropped `NodeHandle` stops its node, and a runtime that ends (or panics)
//! tells the handle so (`NodeHandle::ended`).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use tokio::sync::watch;

/// A stop signal tripped at most once. Cheap to clone; clones share it.
#[derive(Clone)]
pub struct Shutdown(Arc<Signal>);

/// The flag, and the parent whose tripping trips this one too.
struct Signal {
    tripped: watch::Sender<bool>,
    parent: Option<Shutdown>,
}

impl Default for Shutdown {
    fn default() -> Self {
        Shutdown::new()
    }
}

impl Shutdown {
    /// Not tripped, with no parent.
    pub fn new() -> Shutdown {
        Shutdown::with_parent(None)
    }

    fn with_parent(parent: Option<Shutdown>) -> Shutdown {
        Shutdown(Arc::new(Signal {
            tripped: watch::channel(false).0,
            parent,
        }))
    }

    /// A signal tripped by its own [`Shutdown::trip`] or by this one's.
    pub fn child(&self) -> Shutdown {
        Shutdown::with_parent(Some(self.clone()))
    }

    /// Trips the signal (and so every child's); returns whether it was already tripped
    /// by itself (a parent's tripping does not count here).
    pub fn trip(&self) -> bool {
        self.0.tripped.send_replace(true)
    }

    /// Whether this signal or an ancestor's was tripped.
    pub fn is_tripped(&self) -> bool {
        *self.0.tripped.borrow() || self.0.parent.as_ref().is_some_and(Shutdown::is_tripped)
    }

    /// Completes once this signal or an ancestor's is tripped (at once if it is);
    /// cancellation-safe.
    pub async fn tripped(&self) {
        let mut own = self.0.tripped.subscribe();
        // `wait_for` fails only when the sender is gone, and we hold it.
        let own = async move {
            let _ = own.wait_for(|tripped| *tripped).await;
        };
        match &self.0.parent {
            None => own.await,
            Some(parent) => tokio::select! {
                _ = own => {}
                _ = parent.boxed_tripped() => {}
            },
        }
    }

    /// A guard that trips this signal when dropped.
    pub fn trip_on_drop(&self) -> TripOnDrop {
        TripOnDrop(self.clone())
    }

    /// [`Shutdown::tripped`] behind a pointer, so a child can wait on its ancestors.
    fn boxed_tripped(&self) -> Pin<Box<dyn Future<Output = ()> + Send + '_>> {
        Box::pin(self.tripped())
    }
}

/// Trips its signal when dropped (and on [`TripOnDrop::trip`]): whoever holds it stops
/// the signal's waiters by going away, however it goes.
pub struct TripOnDrop(Shutdown);

impl TripOnDrop {
    /// Trips the signal now rather than on drop.
    pub fn trip(&self) {
        self.0.trip();
    }
}

impl Drop for TripOnDrop {
    fn drop(&mut self) {
        self.0.trip();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Completes once `signal` trips; fails the test if that takes over 5 s.
    async fn trips(signal: Shutdown) {
        let waited = tokio::time::timeout(std::time::Duration::from_secs(5), signal.tripped());
        waited.await.expect("the signal trips");
    }

    #[tokio::test]
    async fn tripped_once_and_seen_by_every_clone() {
        let signal = Shutdown::new();
        let waiter = tokio::spawn(trips(signal.clone()));
        assert!(!signal.is_tripped());
        assert!(!signal.trip(), "the first trip");
        assert!(signal.trip(), "already tripped");
        waiter.await.unwrap();
        trips(signal).await;
    }

    #[tokio::test]
    async fn a_guard_trips_its_signal_when_dropped() {
        let signal = Shutdown::new();
        let guard = signal.trip_on_drop();
        assert!(!signal.is_tripped());
        drop(guard);
        trips(signal).await;
    }

    #[tokio::test]
    async fn a_child_trips_alone_or_with_its_parent() {
        let parent = Shutdown::new();
        let first = parent.child();
        first.trip();
        assert!(first.is_tripped());
        assert!(!parent.is_tripped());

        let grandchild = parent.child().child();
        let waiter = tokio::spawn(trips(grandchild.clone()));
        parent.trip();
        assert!(grandchild.is_tripped());
        waiter.await.unwrap();
    }
}
