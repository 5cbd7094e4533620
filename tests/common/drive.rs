//! Driving one `Machine` by hand, shared by the rule tests of both modes.

use bully::protocol::{Action, Body, Event, Machine, Message, Millis, NodeId};

/// Feeds `event` at `now` and returns every action it caused, facts included.
pub fn feed(m: &mut Machine, event: Event, now: Millis) -> Vec<Action> {
    m.handle(event, now);
    std::iter::from_fn(|| m.poll_action()).collect()
}

/// The event of a message from `from` carrying `term`.
pub fn message(from: NodeId, term: u64, body: Body) -> Event {
    Event::Message {
        from,
        msg: Message { term, body },
    }
}
