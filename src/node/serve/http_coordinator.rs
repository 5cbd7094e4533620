//! The `/coordinator` answer: 200 on a ready coordinator ([`Status::ready`],
//! docs/design.md#readiness), else 503 naming who leads. A route of its own because
//! Patroni's `/primary` and `/read-write` answer the same way on a node that keeps no
//! PostgreSQL server (`http_patroni`), so an HAProxy config written for either works.

use super::http_reply::Reply;
use crate::api::Status;
use crate::protocol::Role;

/// The answer to `/coordinator` for `status` (read as of now).
pub fn coordinator(status: &Status) -> Reply {
    let epoch = status
        .epoch
        .map(|e| e.to_string())
        .unwrap_or_else(|| "-".into());
    match (status.role, status.coordinator()) {
        (Role::Coordinator, _) if status.ready() => Reply::text(
            200,
            format!("node {} is the coordinator (epoch {epoch})\n", status.id),
        ),
        (Role::Coordinator, _) => Reply::text(
            503,
            format!(
                "node {} leads epoch {epoch} but is not ready: on_elected has not succeeded\n",
                status.id
            ),
        ),
        (_, Some(c)) => Reply::text(
            503,
            format!(
                "node {} is a {}; the coordinator is node {c} (epoch {epoch})\n",
                status.id, status.role
            ),
        ),
        (_, None) => Reply::text(
            503,
            format!(
                "node {} is a {}; no coordinator known\n",
                status.id, status.role
            ),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::{Cells, Epoch, Mode, View};

    #[test]
    fn coordinator_answers_200_only_when_ready_for_its_epoch() {
        let epoch = |term| Some(Epoch { term, leader: 3 });
        let view = View {
            id: 3,
            role: Role::Coordinator,
            epoch: epoch(4),
            eligible: true,
            incarnation: 1,
        };
        let mut status = Status::initial(view, Mode::Classic, Cells::default(), &[1, 2], 0);
        let code = |s: &Status| coordinator(s).code;
        assert_eq!(code(&status), 503, "on_elected has not succeeded yet");
        status.ready_epoch = epoch(3);
        assert_eq!(code(&status), 503, "ready for an older epoch only");
        status.ready_epoch = epoch(4);
        assert_eq!(code(&status), 200);
        status.set_office(Role::Follower, status.epoch);
        assert_eq!(code(&status), 503, "a follower is never ready");
    }
}
