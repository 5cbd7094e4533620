//! An operator's verb (`bully pg`) on its way from the API (src/node/serve/api.rs) to
//! the manager, with a deadline to be taken up by. An order the API gave up on is
//! dropped when the manager reaches it, never run late (issue 49: a `bully pg
//! restart` that timed out ran once the server came back). The API and the manager
//! settle who won with one atomic step: either the manager took the order in time, and
//! the API waits for its answer, or the API gave up and the manager drops it.

use crate::api::postgres::PgVerb;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::oneshot;
use tokio::time::Instant;

const WAITING: u8 = 0;
const TAKEN: u8 = 1;
const LAPSED: u8 = 2;

type Answer = Result<String, String>;

/// An order in the manager's queue.
pub struct Order {
    verb: PgVerb,
    take_by: Instant,
    state: Arc<AtomicU8>,
    reply: oneshot::Sender<Answer>,
}

/// The API's end of an order: its answer, or why there is none.
pub struct Pending {
    verb: PgVerb,
    take_by: Instant,
    state: Arc<AtomicU8>,
    answer: oneshot::Receiver<Answer>,
}

/// An order the manager took up in time: it runs, and its answer goes back.
pub struct Taken {
    pub verb: PgVerb,
    reply: oneshot::Sender<Answer>,
}

/// Hands `verb` to the manager through `orders` and waits for its answer: the API's
/// `bully pg` verbs and a reload's (SIGHUP) changed parameters both go this way.
pub async fn hand(
    orders: &tokio::sync::mpsc::Sender<Order>,
    verb: PgVerb,
    wait: Duration,
) -> Answer {
    let (order, pending) = order(verb, wait);
    match tokio::time::timeout_at(pending.take_by(), orders.send(order)).await {
        Ok(Ok(())) => pending.answer().await,
        Ok(Err(_)) => Err("the PostgreSQL manager is not running".to_string()),
        Err(_) => Err(format!(
            "the PostgreSQL manager's queue stayed full for {} s: `{}` will not run",
            wait.as_secs(),
            verb.word()
        )),
    }
}

/// A new order for `verb`, to be taken up within `wait`.
pub fn order(verb: PgVerb, wait: Duration) -> (Order, Pending) {
    let take_by = Instant::now() + wait;
    let state = Arc::new(AtomicU8::new(WAITING));
    let (reply, answer) = oneshot::channel();
    let order = Order {
        verb,
        take_by,
        state: Arc::clone(&state),
        reply,
    };
    let pending = Pending {
        verb,
        take_by,
        state,
        answer,
    };
    (order, pending)
}

impl Order {
    /// Takes the order up: an error saying why it is dropped instead (its deadline
    /// passed, or nobody waits for its answer any more), answered so where someone
    /// still listens.
    pub fn take(self) -> Result<Taken, String> {
        let verb = self.verb.word();
        let why = if Instant::now() >= self.take_by {
            Some("it waited past its deadline")
        } else if self.reply.is_closed() {
            Some("nobody waits for its answer")
        } else {
            None
        };
        let won = why.is_none()
            && self
                .state
                .compare_exchange(WAITING, TAKEN, Ordering::AcqRel, Ordering::Acquire)
                .is_ok();
        if won {
            return Ok(Taken {
                verb: self.verb,
                reply: self.reply,
            });
        }
        self.state.store(LAPSED, Ordering::Release);
        let why = format!(
            "the operator's `{verb}` is dropped, not run: {}",
            why.unwrap_or("the API gave up on it")
        );
        let _ = self.reply.send(Err(why.clone()));
        Err(why)
    }
}

impl Taken {
    /// Sends the answer back (nobody may listen any more: then it is dropped).
    pub fn answer(self, answer: Answer) {
        let _ = self.reply.send(answer);
    }
}

impl Pending {
    /// When the order lapses unless taken up.
    pub fn take_by(&self) -> Instant {
        self.take_by
    }

    /// The manager's answer; once the order's deadline passes untaken, an error saying
    /// it will not run. A taken order is waited for to its end (the manager's steps
    /// each have their own timeout).
    pub async fn answer(mut self) -> Answer {
        let stopped = |_| "the PostgreSQL manager stopped before it answered".to_string();
        tokio::select! {
            answer = &mut self.answer => return answer.map_err(stopped)?,
            _ = tokio::time::sleep_until(self.take_by) => {}
        }
        let gave_up =
            self.state
                .compare_exchange(WAITING, LAPSED, Ordering::AcqRel, Ordering::Acquire);
        match gave_up {
            Ok(_) => Err(lapsed(self.verb)),
            Err(TAKEN) => self.answer.await.map_err(stopped)?,
            Err(_) => match self.answer.await {
                Ok(answer) => answer,
                Err(_) => Err(lapsed(self.verb)),
            },
        }
    }
}

/// The answer to an order the manager did not take up in time.
fn lapsed(verb: PgVerb) -> String {
    format!(
        "the PostgreSQL manager did not take `{}` up in time; it will not run",
        verb.word()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn an_order_taken_in_time_runs_and_is_answered_after_its_deadline() {
        let (order, pending) = order(PgVerb::Restart, Duration::from_millis(100));
        let manager = tokio::spawn(async move {
            let taken = order.take().expect("in time");
            // Running it may take longer than the deadline: the API still waits.
            tokio::time::sleep(Duration::from_millis(300)).await;
            taken.answer(Ok("restarted".into()));
        });
        assert_eq!(pending.answer().await, Ok("restarted".into()));
        manager.await.unwrap();
    }

    #[tokio::test]
    async fn an_order_past_its_deadline_is_dropped_not_run() {
        let (order, pending) = order(PgVerb::Restart, Duration::from_millis(50));
        let answer = pending.answer().await;
        assert!(answer.unwrap_err().contains("will not run"));
        let why = order.take().err().expect("dropped");
        assert!(why.contains("dropped, not run"), "{why}");
    }

    #[tokio::test]
    async fn an_order_reached_late_is_dropped_even_if_the_api_still_waits() {
        let (order, pending) = order(PgVerb::Restart, Duration::from_millis(50));
        tokio::time::sleep(Duration::from_millis(100)).await;
        let why = order.take().err().expect("dropped");
        assert!(why.contains("past its deadline"), "{why}");
        assert!(pending.answer().await.is_err());
    }

    #[tokio::test]
    async fn an_order_nobody_waits_for_is_dropped() {
        let (order, pending) = order(PgVerb::Reload, Duration::from_secs(30));
        drop(pending);
        let why = order.take().err().expect("dropped");
        assert!(why.contains("nobody waits"), "{why}");
    }

    #[tokio::test]
    async fn the_api_giving_up_first_wins_over_a_late_take() {
        let (order, pending) = order(PgVerb::Restart, Duration::from_secs(30));
        // The API's step at the deadline, before the manager's take.
        assert!(pending
            .state
            .compare_exchange(WAITING, LAPSED, Ordering::AcqRel, Ordering::Acquire)
            .is_ok());
        assert!(order.take().is_err());
    }
}
