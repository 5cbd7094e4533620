//! Driving one `Machine` by hand, shared by the rule tests of both modes.

// Each rule-test binary includes this file and uses its own share of it.
#![allow(dead_code)]

use bully::protocol::{
    Action, Body, Cells, Event, Machine, MachineConfig, Message, Millis, NodeId,
};

/// Feeds `event` at `now` and returns every action it caused, facts included.
pub fn feed(m: &mut Machine, event: Event, now: Millis) -> Vec<Action> {
    m.handle(event, now);
    std::iter::from_fn(|| m.poll_action()).collect()
}

/// Lets time pass to `now`: whatever deadlines are due fire.
pub fn tick(m: &mut Machine, now: Millis) -> Vec<Action> {
    feed(m, Event::Tick, now)
}

/// The messages in `actions` as (to, body).
pub fn sent(actions: &[Action]) -> Vec<(NodeId, Body)> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::Send { to, msg } => Some((*to, msg.body.clone())),
            _ => None,
        })
        .collect()
}

/// The event of a message from `from` carrying `term`.
pub fn message(from: NodeId, term: u64, body: Body) -> Event {
    Event::Message {
        from,
        msg: Message {
            promise_ms: 0,
            term,
            config: Default::default(),
            est: None,
            body,
        },
    }
}

/// Starts a machine from `cells` in a running cluster: the transport reports every peer
/// up at once (the start-up wait for unreached peers is tested on its own). The start-up
/// actions are dropped.
pub fn start_connected(config: MachineConfig, cells: Cells, now: Millis) -> Machine {
    let peers = config.peers.clone();
    let mut m = Machine::start(config, cells, now);
    for peer in peers {
        m.handle(Event::PeerUp(peer), now);
    }
    while m.poll_action().is_some() {}
    m
}

/// A member (quorum, the default mode) whose empty store needs no recovery, so a rule test can start it at
/// t = 0; the recovery rules have their own tests (`store_recovery_*`).
pub fn rule_member(id: NodeId, peers: &[NodeId]) -> MachineConfig {
    MachineConfig::new(id, peers.to_vec()).with_store_recovery(false)
}
