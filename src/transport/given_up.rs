//! Members a forced recovery on this node gave up (`bully recover`,
//! src/protocol/machine/given_up.rs): how they learn it.
//! - They dial us: the accept loop refuses them with [`close::GIVEN_UP`]
//!   (`accept.rs`).
//! - We dial them ([`tell`]), once per member and process life: a member cut off
//!   until a heal may keep a dead connection to our earlier life until its silence
//!   timeout (20 D) and dial us only then, leading meanwhile. So we reach it as soon
//!   as the network does, wait for its hello (its side is then past the handshake
//!   and knows who we are), and close with [`close::GIVEN_UP`].
//! - Either way the refused node's transport reports [`TransportEvent::GivenUp`]
//!   ([`report`]).

use super::backoff::next_delay;
use super::close;
use super::event::TransportEvent;
use super::hello::{self, HELLO_TIMEOUT};
use super::peer_addr::PeerAddr;
use super::shared::Shared;
use crate::certs::node_dns_name;
use crate::protocol::NodeId;
use crate::shutdown::Shutdown;
use std::sync::Arc;
use tracing::{debug, info, warn};

/// Dials the given-up member `peer` at `addr` until one connection has told it, then
/// ends. Retries with the dialer's backoff while it cannot be reached. Ends untold once
/// our list holds `peer` again (re-added as a new member: it is no longer given up).
pub(super) async fn tell(shared: Arc<Shared>, peer: NodeId, addr: PeerAddr) {
    let shutdown = shared.shutdown();
    let mut delay = None;
    loop {
        if shared.is_peer(peer) {
            return;
        }
        let told = tokio::select! {
            told = tell_once(&shared, peer, &addr) => told,
            _ = shutdown.tripped() => return,
        };
        match told {
            Ok(()) => {
                info!(peer, "told node {peer} that a forced recovery gave it up");
                return;
            }
            Err(reason) => debug!(peer, %reason, "could not tell a given-up member yet"),
        }
        let wait = next_delay(delay);
        delay = Some(wait);
        tokio::select! {
            _ = tokio::time::sleep(wait) => {}
            _ = shutdown.tripped() => return,
        }
    }
}

/// One connection: handshake, the peer's hello, our close.
async fn tell_once(shared: &Shared, peer: NodeId, addr: &PeerAddr) -> Result<(), String> {
    let target = addr
        .resolve(shared.local_addr)
        .await
        .map_err(|e| e.to_string())?;
    let endpoint = shared.endpoint().ok_or("shutting down")?;
    let connecting = endpoint
        .connect_with(shared.dial_config(), target, &node_dns_name(peer))
        .map_err(|e| e.to_string())?;
    drop(endpoint);
    let conn = tokio::time::timeout(shared.silence, connecting)
        .await
        .map_err(|_| format!("no handshake within {:?}", shared.silence))?
        .map_err(|e| e.to_string())?;
    let heard = tokio::time::timeout(HELLO_TIMEOUT, hello::recv(&conn)).await;
    if shared.is_peer(peer) {
        conn.close(close::SUPERSEDED, b"a member again");
        return Err("a member again".to_string());
    }
    conn.close(close::GIVEN_UP, reason(shared.id, peer).as_bytes());
    match heard {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(e)) => Err(format!("no hello: {e}")),
        Err(_) => Err(format!("no hello within {HELLO_TIMEOUT:?}")),
    }
}

/// What a survivor tells a member it gave up.
pub(super) fn reason(me: NodeId, peer: NodeId) -> String {
    format!(
        "node-{peer} was given up by a forced recovery (bully recover) on node-{me}: it must \
         stand down for good; wipe its data dir and add it back as a new member"
    )
}

/// `peer` closed our connection (ours or its own) as given up, in `reason`: logs it
/// (once per distinct reason, `last` remembers) and tells the runtime. False at
/// shutdown.
pub(super) async fn report(
    shared: &Shared,
    peer: NodeId,
    reason: String,
    last: &mut Option<String>,
    shutdown: &Shutdown,
) -> bool {
    if last.as_deref() != Some(reason.as_str()) {
        warn!(peer, %reason, "refused as given up by a forced recovery");
        *last = Some(reason.clone());
    }
    let event = TransportEvent::GivenUp { by: peer, reason };
    shared.events.emit(event, shutdown).await
}
