//! Connection slots for the HTTP endpoint: every accepted connection gets a task at
//! once (so a well-formed request never waits behind slow ones), and at most `max` are
//! open; a new connection beyond that evicts the oldest. Slow clients that open
//! connections and send half a request therefore cannot starve `/coordinator`, and
//! memory stays bounded by `max` connections of at most one request head each.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};
use tokio::task::AbortHandle;

/// The open connections, oldest first.
pub struct Slots {
    max: usize,
    open: Mutex<Open>,
}

#[derive(Default)]
struct Open {
    next_id: u64,
    /// `None` until the connection's task is attached.
    tasks: VecDeque<(u64, Option<AbortHandle>)>,
}

/// A connection's place among the open ones; dropping it frees the place.
pub struct Slot {
    id: u64,
    slots: Arc<Slots>,
}

impl Slots {
    /// Room for `max` connections (at least one).
    pub fn new(max: usize) -> Arc<Slots> {
        Arc::new(Slots {
            max: max.max(1),
            open: Mutex::default(),
        })
    }

    fn lock(&self) -> MutexGuard<'_, Open> {
        self.open.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Takes a place for a new connection, evicting the oldest open one when full.
    /// Returns the slot and how many connections were evicted (0 or 1).
    pub fn take(self: &Arc<Self>) -> (Slot, usize) {
        let mut open = self.lock();
        let mut evicted = 0;
        while open.tasks.len() >= self.max {
            if let Some((_, Some(task))) = open.tasks.pop_front() {
                task.abort();
            }
            evicted += 1;
        }
        let id = open.next_id;
        open.next_id += 1;
        open.tasks.push_back((id, None));
        let slot = Slot {
            id,
            slots: Arc::clone(self),
        };
        (slot, evicted)
    }

    /// Records the task serving `slot`'s connection, so an eviction can stop it. A
    /// slot already freed (the task finished first) is left alone.
    pub fn attach(&self, id: u64, task: AbortHandle) {
        let mut open = self.lock();
        if let Some(entry) = open.tasks.iter_mut().find(|(i, _)| *i == id) {
            entry.1 = Some(task);
        }
    }

    /// Connections open now.
    pub fn len(&self) -> usize {
        self.lock().tasks.len()
    }

    /// Whether no connection is open.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl Slot {
    /// The ID to [`Slots::attach`] the connection's task under.
    pub fn id(&self) -> u64 {
        self.id
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut open = self.slots.lock();
        open.tasks.retain(|(id, _)| *id != self.id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn the_oldest_connection_is_evicted_when_full() {
        let slots = Slots::new(2);
        let mut tasks = Vec::new();
        for _ in 0..3 {
            let (slot, _) = slots.take();
            let id = slot.id();
            let task = tokio::spawn(async move {
                let _slot = slot;
                tokio::time::sleep(Duration::from_secs(30)).await;
            });
            slots.attach(id, task.abort_handle());
            tasks.push(task);
        }
        let first = tasks.remove(0);
        let aborted = tokio::time::timeout(Duration::from_secs(5), first).await;
        assert!(aborted
            .expect("evicted at once")
            .unwrap_err()
            .is_cancelled());
        assert_eq!(slots.len(), 2);
        for task in &tasks {
            task.abort();
        }
        for task in tasks {
            let _ = task.await;
        }
        assert!(slots.is_empty(), "a finished connection frees its slot");
    }
}
