//! Criterion benches for one step of the Bully state machine: the two steps a healthy
//! cluster repeats forever (a follower taking a heartbeat, a coordinator's heartbeat
//! tick), each including draining the actions the step produced.
//!
//! Run: `cargo bench --bench machine`.

use bully::protocol::{
    Body, Cells, Epoch, Event, Machine, MachineConfig, Message, Millis, Mode, NodeId,
};
use criterion::{black_box, criterion_group, criterion_main, BenchmarkId, Criterion};

fn config(id: NodeId, nodes: u64) -> MachineConfig {
    let peers = (1..=nodes).filter(|&p| p != id).collect();
    MachineConfig::new(id, peers).with_mode(Mode::Classic)
}

fn drain(machine: &mut Machine) -> usize {
    let mut count = 0;
    while let Some(action) = machine.poll_action() {
        black_box(action);
        count += 1;
    }
    count
}

/// A follower of node `nodes` that has accepted its epoch and follows it.
fn follower(nodes: u64) -> (Machine, Message) {
    let epoch = Epoch {
        term: 41,
        leader: nodes,
    };
    let cells = Cells {
        term: 41,
        accepted: Some(epoch),
        incarnation: 2,
        promise_ms: 0,
        recovered: false,
        given_up: false,
        awaits_survivors: false,
    };
    let mut machine = Machine::start(config(1, nodes), cells, 0);
    let heartbeat = Message {
        promise_ms: 0,
        term: 41,
        config: Default::default(),
        est: None,
        body: Body::Heartbeat { epoch, round: 0 },
    };
    machine.handle(
        Event::Message {
            from: nodes,
            msg: heartbeat.clone(),
        },
        1,
    );
    drain(&mut machine);
    (machine, heartbeat)
}

/// The highest node, once it has declared itself coordinator (from a store that has
/// run before: an empty one first recovers its terms, src/protocol/recovery.rs).
fn coordinator(nodes: u64) -> (Machine, Millis) {
    let cells = Cells {
        term: 41,
        accepted: None,
        incarnation: 2,
        promise_ms: 0,
        recovered: false,
        given_up: false,
        awaits_survivors: false,
    };
    let mut machine = Machine::start(config(nodes, nodes), cells, 0);
    let now = machine.next_deadline();
    machine.handle(Event::Tick, now);
    drain(&mut machine);
    (machine, now)
}

fn step(c: &mut Criterion) {
    let mut group = c.benchmark_group("machine step");
    for nodes in [5u64, 32] {
        group.bench_with_input(
            BenchmarkId::new("follower handles heartbeat", nodes),
            &nodes,
            |b, &nodes| {
                let (mut machine, heartbeat) = follower(nodes);
                let mut now: Millis = 1;
                b.iter(|| {
                    now += 1;
                    machine.handle(
                        Event::Message {
                            from: nodes,
                            msg: black_box(heartbeat.clone()),
                        },
                        now,
                    );
                    drain(&mut machine)
                })
            },
        );
        group.bench_with_input(
            BenchmarkId::new("coordinator heartbeat tick", nodes),
            &nodes,
            |b, &nodes| {
                let (mut machine, mut now) = coordinator(nodes);
                b.iter(|| {
                    now = machine.next_deadline();
                    machine.handle(Event::Tick, black_box(now));
                    drain(&mut machine)
                })
            },
        );
    }
    group.finish();
}

criterion_group!(benches, step);
criterion_main!(benches);
