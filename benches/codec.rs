//! Criterion benches for the frame codec: what one peer message costs to put on the
//! wire and to take off it (the work done per message on every hop).
//!
//! Run: `cargo bench --bench codec`.

use bully::api::Status;
use bully::codec::{decode_frame, encode_frame};
use bully::protocol::{Body, Epoch, Message, Role, View};
use criterion::{black_box, criterion_group, criterion_main, Criterion};

/// The most frequent message: a coordinator's heartbeat.
fn heartbeat() -> Message {
    Message {
        promise_ms: 0,
        term: 41,
        config: Default::default(),
        est: None,
        body: Body::Heartbeat {
            epoch: Epoch {
                term: 41,
                leader: 5,
            },
            round: 7,
        },
    }
}

/// The largest frame a client sees: a status with 32 peers.
fn big_status() -> Status {
    let view = View {
        id: 32,
        role: Role::Coordinator,
        epoch: Some(Epoch {
            term: 41,
            leader: 32,
        }),
        eligible: true,
        incarnation: 3,
    };
    let peers: Vec<u64> = (1..32).collect();
    Status::initial(
        view,
        Default::default(),
        Default::default(),
        &peers,
        1_700_000_000_000,
    )
}

fn codec(c: &mut Criterion) {
    let msg = heartbeat();
    let frame = encode_frame(&msg).expect("a heartbeat encodes");
    c.bench_function("encode_frame heartbeat", |b| {
        b.iter(|| encode_frame(black_box(&msg)).expect("encodes"))
    });
    c.bench_function("decode_frame heartbeat", |b| {
        b.iter(|| decode_frame::<Message>(black_box(&frame)).expect("decodes"))
    });
    let status = big_status();
    let status_frame = encode_frame(&status).expect("a status encodes");
    c.bench_function("encode_frame status(32 peers)", |b| {
        b.iter(|| encode_frame(black_box(&status)).expect("encodes"))
    });
    c.bench_function("decode_frame status(32 peers)", |b| {
        b.iter(|| decode_frame::<Status>(black_box(&status_frame)).expect("decodes"))
    });
}

criterion_group!(benches, codec);
criterion_main!(benches);
