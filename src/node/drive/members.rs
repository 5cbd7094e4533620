//! The member list as the runtime lives by it (docs/design.md#membership): the list a
//! node seeds from its config file on its first start, whom the transport dials once a
//! list is stored, and the warning when the config file no longer says what the stored
//! list says (the stored one rules; the file seeded the first list only).

use crate::config::NodeConfig;
use crate::protocol::{Member, Membership, NodeId, Seat};
use crate::transport::PeerAddr;

/// The list a node starts from when its store holds none: itself and its `[[peers]]`,
/// with their addresses, unconfirmed (`ConfigId::default()`).
pub fn seed(config: &NodeConfig) -> Membership {
    let seat = |witness: bool| if witness { Seat::Witness } else { Seat::Voter };
    let own_addr = if config.listen.ip().is_unspecified() {
        String::new()
    } else {
        config.listen.to_string()
    };
    let mut members = vec![Member {
        id: config.id,
        seat: seat(config.witness),
        learner: false,
        addr: own_addr,
    }];
    members.extend(config.peers.iter().map(|p| Member {
        id: p.id,
        seat: seat(p.witness),
        learner: false,
        addr: p.addr.to_string(),
    }));
    Membership::seeded(members)
}

/// Whom to dial for `list`: every other member, at the address this node's config file
/// gives it (`fallback`: a host may reach a peer by another route, e.g. a relay or a
/// private network), else at the address the list gives (a member added at runtime).
/// A member with neither is left out, and said so.
pub fn dial_list(list: &Membership, me: NodeId, fallback: &NodeConfig) -> Vec<(NodeId, PeerAddr)> {
    dial_addresses(&list.members, me, fallback)
}

/// Where to dial each of `members` but `me`: as [`dial_list`] says.
pub fn dial_addresses(
    members: &[Member],
    me: NodeId,
    fallback: &NodeConfig,
) -> Vec<(NodeId, PeerAddr)> {
    members
        .iter()
        .filter(|m| m.id != me)
        .filter_map(|m| {
            let listed = m.addr.parse::<PeerAddr>().ok();
            let from_file = || {
                fallback
                    .peers
                    .iter()
                    .find(|p| p.id == m.id)
                    .map(|p| p.addr.clone())
            };
            let addr = from_file().or(listed);
            if addr.is_none() {
                tracing::warn!(
                    peer = m.id,
                    "member {} has no address in the member list nor in the config file; \
                     it is not dialed (it can still dial us)",
                    m.id
                );
            }
            addr.map(|a| (m.id, a))
        })
        .collect()
}

/// `listed` plus the peers in `keep` that the list no longer names but `before` dialed:
/// a member being removed stays connected until the change is committed.
pub fn keep_departing(
    listed: Vec<(NodeId, PeerAddr)>,
    before: &[(NodeId, PeerAddr)],
    keep: &std::collections::BTreeSet<NodeId>,
) -> Vec<(NodeId, PeerAddr)> {
    let mut dial = listed;
    for (id, addr) in before {
        if keep.contains(id) && !dial.iter().any(|(d, _)| d == id) {
            dial.push((*id, addr.clone()));
        }
    }
    dial
}

/// What the config file's member list says that the stored list does not, if anything:
/// one line for a warning at start. The stored list rules.
pub fn file_disagrees(stored: &Membership, config: &NodeConfig) -> Option<String> {
    let mut in_file: Vec<NodeId> = config.peers.iter().map(|p| p.id).collect();
    in_file.push(config.id);
    in_file.sort_unstable();
    let listed: Vec<NodeId> = stored.members.iter().map(|m| m.id).collect();
    (in_file != listed).then(|| {
        format!(
            "the config file lists members {in_file:?}, the stored member list {} has \
             {listed:?}; the stored list rules (change it with `bully member`; the file \
             seeded the first start only, its addresses are still dialed)",
            stored.id
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> NodeConfig {
        crate::config::sample::node_two()
    }

    #[test]
    fn the_seed_lists_the_file_and_dial_falls_back_to_it() {
        let config = config();
        let list = seed(&config);
        assert_eq!(list.members.len(), 3);
        let mut without_addrs = list.clone();
        for m in &mut without_addrs.members {
            m.addr.clear();
        }
        let dial = dial_list(&without_addrs, 2, &config);
        assert_eq!(dial.iter().map(|d| d.0).collect::<Vec<_>>(), vec![1, 3]);
        assert!(file_disagrees(&list, &config).is_none());
        let mut grown = list;
        grown.members.push(Member {
            id: 4,
            seat: Seat::Voter,
            learner: false,
            addr: "127.0.0.1:9".into(),
        });
        assert!(file_disagrees(&grown, &config)
            .unwrap()
            .contains("stored list rules"));
    }
}
