//! What a member that does not lead does with a request only the coordinator can serve:
//! it passes it on to the coordinator it follows, once (docs/design.md#asking-who-leads
//! and #membership). `bully leader` asked of a follower is answered read-index style
//! ([`leader`]); a step-down, a switchover, a scheduled one or its cancel is passed on
//! whole ([`to_coordinator`]), and the answer says which node acted.

use super::switchover::{ask_member, PeerApis, ASK_TIMEOUT};
use crate::api::{LeaderReply, Request, Response, Status};
use crate::client::STEP_DOWN_TIMEOUT;
use crate::client_pool::Within;
use crate::protocol::{NodeId, Role};
use std::time::Duration;

/// How long a follower waits for the coordinator's own status when asked who leads,
/// connecting included: a coordinator that takes longer is reported as not answering
/// (well inside a client's default 2 s timeout).
const CONFIRM_WITHIN: Duration = Duration::from_millis(500);

/// The answer to [`Request::Leader`] from a node whose status is `now`: its own status,
/// and, if it follows a coordinator, that coordinator's status as it answers now (read
/// against its own lease, Q4), or why it could not be asked.
pub async fn leader(members: &PeerApis, now: Status) -> Response {
    let coordinator = match (now.role, now.coordinator()) {
        (Role::Follower, Some(id)) => Some(confirmation(members, &now, id).await),
        _ => None,
    };
    Response::Leader(LeaderReply {
        own: now,
        coordinator,
    })
}

/// Coordinator `id`'s own status, asked by the node whose status is `now` (at once
/// refused when its link to `id` is down), or why there is none.
async fn confirmation(members: &PeerApis, now: &Status, id: NodeId) -> Result<Status, String> {
    let link_up = now.peers.iter().any(|p| p.id == id && p.connected);
    if !link_up {
        return Err(format!("node {} has no link to coordinator {id}", now.id));
    }
    let asked = ask_member(
        members,
        now,
        id,
        Request::Status,
        Within::quick(CONFIRM_WITHIN, CONFIRM_WITHIN),
    );
    match tokio::time::timeout(CONFIRM_WITHIN, asked).await {
        Ok(Ok(Response::Status(theirs))) => Ok(theirs),
        Ok(Ok(other)) => Err(format!("coordinator {id} answered {other:?}")),
        Ok(Err(e)) => Err(format!(
            "coordinator {id} did not answer node {}: {e}",
            now.id
        )),
        Err(_) => Err(format!(
            "coordinator {id} did not answer node {} within {} ms",
            now.id,
            CONFIRM_WITHIN.as_millis()
        )),
    }
}

/// Whether `request` is one only the coordinator serves, which a member that does not
/// lead passes on.
pub fn for_the_coordinator(request: &Request) -> bool {
    matches!(
        request,
        Request::StepDown { .. }
            | Request::SwitchOver { .. }
            | Request::ScheduleSwitchOver { .. }
            | Request::CancelSwitchOver
    )
}

/// Passes `request` from the node whose status is `now` (not the coordinator) to the
/// coordinator it follows, as [`Request::Forwarded`]; its answer comes back naming who
/// acted. Refused when the node knows no coordinator.
pub async fn to_coordinator(members: &PeerApis, now: &Status, request: Request) -> Response {
    let Some(coordinator) = now.coordinator().filter(|&c| c != now.id) else {
        return Response::Refused(format!(
            "node {} does not lead and knows no coordinator to pass the request to; try \
             again once one is elected (`bully status --cluster`)",
            now.id
        ));
    };
    let forwarded = Request::Forwarded {
        request: Box::new(request),
    };
    let through = |text: String| {
        format!(
            "coordinator {coordinator} (asked through node {}): {text}",
            now.id
        )
    };
    match ask_member(
        members,
        now,
        coordinator,
        forwarded,
        Within::fresh(ASK_TIMEOUT, STEP_DOWN_TIMEOUT),
    )
    .await
    {
        Ok(Response::Done(text)) => Response::Done(through(text)),
        Ok(Response::Refused(text)) => Response::Refused(through(text)),
        Ok(other) => Response::Refused(format!("coordinator {coordinator} answered {other:?}")),
        Err(e) => Response::Refused(format!(
            "node {} passed the request to coordinator {coordinator}, which is unreachable: {e}",
            now.id
        )),
    }
}
