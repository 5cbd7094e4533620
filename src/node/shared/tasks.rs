//! The tasks a node runs beside its runtime (hook runner, health check, HTTP server and
//! connections, API connections and streams) and the one signal that stops them all, so
//! a stopped node leaves no task or socket behind (tests/node_shutdown.rs).
//!
//! The pattern of mini-redis's graceful shutdown, on tokio alone: every task is spawned
//! through [`NodeTasks::spawn`], which counts it until its future is dropped (finished,
//! aborted or panicked), and selects on [`NodeTasks::stopped`]; the runtime trips
//! [`NodeTasks::stop`] once and then [`NodeTasks::wait`]s for the count to reach zero.
//! A [`NodeTasks::child`] stops with its parent or on its own: a reload retires the
//! health check or HTTP server it replaces that way, without touching the rest. The
//! signal itself is [`Shutdown`], the one the transport's tasks stop on too; this file
//! adds the count.

use crate::shutdown::Shutdown;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// A stop signal and a count of the tasks spawned under it. Cheap to clone; clones
/// share both.
#[derive(Clone)]
pub struct NodeTasks {
    stop: Shutdown,
    alive: Arc<watch::Sender<usize>>,
}

/// Decrements the count when the task's future is dropped, however it ends.
struct Alive(Arc<watch::Sender<usize>>);

impl Drop for Alive {
    fn drop(&mut self) {
        self.0.send_modify(|n| *n -= 1);
    }
}

impl Default for NodeTasks {
    fn default() -> Self {
        NodeTasks::new()
    }
}

impl NodeTasks {
    /// No task yet, not stopped.
    pub fn new() -> NodeTasks {
        NodeTasks {
            stop: Shutdown::new(),
            alive: Arc::new(watch::channel(0).0),
        }
    }

    /// A group that stops with this one or by its own [`NodeTasks::stop`]; its tasks
    /// count towards this one's [`NodeTasks::wait`].
    pub fn child(&self) -> NodeTasks {
        NodeTasks {
            stop: self.stop.child(),
            alive: Arc::clone(&self.alive),
        }
    }

    /// Spawns `task`, counted until its future is dropped. The task is expected to
    /// select on [`NodeTasks::stopped`] wherever it waits.
    pub fn spawn<F>(&self, task: F) -> JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.alive.send_modify(|n| *n += 1);
        let alive = Alive(Arc::clone(&self.alive));
        tokio::spawn(async move {
            let _alive = alive;
            task.await
        })
    }

    /// Runs `task` on a thread of its own, with a runtime of its own, counted as
    /// [`NodeTasks::spawn`] counts: its blocking work (file writes and their fsyncs,
    /// child processes, `/proc` reads) then never stalls the node's runtime, which is
    /// one thread (src/cli/mod.rs) and must keep its heartbeats on a busy host.
    pub fn spawn_on_thread<F>(&self, name: &str, task: F) -> std::io::Result<()>
    where
        F: Future<Output = ()> + Send + 'static,
    {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        self.alive.send_modify(|n| *n += 1);
        let alive = Alive(Arc::clone(&self.alive));
        std::thread::Builder::new()
            .name(name.into())
            .spawn(move || {
                runtime.block_on(task);
                // The tasks it spawned (database connections) end with it.
                drop(runtime);
                drop(alive);
            })?;
        Ok(())
    }

    /// Trips the signal: every task of this group (and of its children) winds down.
    pub fn stop(&self) {
        self.stop.trip();
    }

    /// Whether [`NodeTasks::stop`] was called on this group or an ancestor.
    pub fn is_stopped(&self) -> bool {
        self.stop.is_tripped()
    }

    /// Completes once the group is stopped (at once if it is); cancellation-safe.
    pub async fn stopped(&self) {
        self.stop.tripped().await
    }

    /// Runs `work` unless the group stops first: `None` then.
    pub async fn until_stopped<T>(&self, work: impl Future<Output = T>) -> Option<T> {
        tokio::select! {
            biased;
            _ = self.stopped() => None,
            done = work => Some(done),
        }
    }

    /// Tasks spawned through any group sharing this count that are still running.
    pub fn alive(&self) -> usize {
        *self.alive.borrow()
    }

    /// Waits up to `grace` for every counted task to end; returns how many still run.
    pub async fn wait(&self, grace: Duration) -> usize {
        let mut alive = self.alive.subscribe();
        let _ = tokio::time::timeout(grace, alive.wait_for(|n| *n == 0)).await;
        self.alive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SOON: Duration = Duration::from_secs(5);

    #[tokio::test]
    async fn stop_ends_every_task_and_wait_sees_them_go() {
        let tasks = NodeTasks::new();
        for _ in 0..3 {
            let group = tasks.clone();
            tasks.spawn(async move { group.stopped().await });
        }
        assert_eq!(tasks.alive(), 3);
        assert_eq!(
            tasks.wait(Duration::from_millis(50)).await,
            3,
            "not stopped"
        );
        tasks.stop();
        assert!(tasks.is_stopped());
        assert_eq!(tasks.wait(SOON).await, 0);
    }

    #[tokio::test]
    async fn a_task_on_its_own_thread_blocks_nothing_and_is_counted() {
        let tasks = NodeTasks::new();
        let group = tasks.clone();
        let (blocked, unblock) = std::sync::mpsc::channel::<()>();
        tasks
            .spawn_on_thread("blocking", async move {
                // A write to a stalled disk: the whole thread waits.
                let _ = unblock.recv();
                group.stopped().await;
            })
            .unwrap();
        assert_eq!(tasks.alive(), 1);
        // This runtime still runs while the other thread is blocked.
        tokio::time::sleep(Duration::from_millis(10)).await;
        drop(blocked);
        tasks.stop();
        assert_eq!(tasks.wait(SOON).await, 0, "counted until it ended");
    }

    #[tokio::test]
    async fn a_child_stops_alone_or_with_its_parent() {
        let parent = NodeTasks::new();
        let first = parent.child();
        let group = first.clone();
        first.spawn(async move { group.stopped().await });
        first.stop();
        assert_eq!(parent.wait(SOON).await, 0, "the child's task ended");
        assert!(!parent.is_stopped());

        let second = parent.child();
        let group = second.clone();
        second.spawn(async move { group.until_stopped(std::future::pending::<()>()).await });
        parent.stop();
        assert!(second.is_stopped());
        assert_eq!(parent.wait(SOON).await, 0, "the parent stopped the child");
    }

    #[tokio::test]
    async fn an_aborted_task_is_no_longer_counted() {
        let tasks = NodeTasks::new();
        let task = tasks.spawn(std::future::pending::<()>());
        task.abort();
        assert_eq!(tasks.wait(SOON).await, 0);
    }
}
