//! The member list as the runtime lives by it (docs/design.md#membership): the list a
//! node seeds from its config file on its first start, whom the transport dials once a
//! list is stored, and the warning when the config file no longer says what the stored
//! list says (the stored one rules; the file seeded the first list only).

use crate::config::NodeConfig;
use crate::protocol::{ClusterSettings, Member, Membership, NodeId, Seat, PG_KEYS};
use crate::transport::PeerAddr;
use std::collections::BTreeMap;

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
    Membership::seeded(members).with_settings(file_settings(config))
}

/// The cluster settings `config` names: what the first coordinator's list carries for
/// a new cluster, and what a file is compared with afterwards.
pub fn file_settings(config: &NodeConfig) -> ClusterSettings {
    let parameters = config
        .postgres
        .as_ref()
        .map(|pg| pg.parameters.clone())
        .unwrap_or_default();
    let mut settings =
        ClusterSettings::new(config.timing, config.preempt).with_pg_parameters(parameters);
    settings.pg_synchronous = config.postgres.as_ref().map(|pg| pg.synchronous);
    settings.pg_standby_cluster = config
        .postgres
        .as_ref()
        .and_then(|pg| pg.standby_cluster.clone());
    settings
}

/// `list` with what its settings miss filled from `config`: a list stored before the
/// settings were part of it, or before PostgreSQL's parameters and synchronous mode
/// were (or seeded by a member without `[postgres]`), lives by the file's until a
/// coordinator writes the next list (docs/design.md#cluster-settings).
pub fn fill_from_file(mut list: Membership, config: &NodeConfig) -> Membership {
    let file = file_settings(config);
    let settings = list.settings.get_or_insert_with(|| file.clone());
    if settings.pg_parameters.is_none() {
        settings.pg_parameters = file.pg_parameters;
    }
    if settings.pg_synchronous.is_none() {
        settings.pg_synchronous = file.pg_synchronous;
    }
    list
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

/// What the config file says of the cluster that the list this node holds does not, if
/// anything: one line for a warning at start and for `bully status`. The list rules;
/// the file seeded the first start only (docs/design.md#cluster-settings).
pub fn file_disagrees(held: &Membership, config: &NodeConfig) -> Option<String> {
    let parts: Vec<String> = [members_differ(held, config), settings_differ(held, config)]
        .into_iter()
        .flatten()
        .collect();
    (!parts.is_empty()).then(|| parts.join("; "))
}

fn members_differ(held: &Membership, config: &NodeConfig) -> Option<String> {
    let mut in_file: Vec<NodeId> = config.peers.iter().map(|p| p.id).collect();
    in_file.push(config.id);
    in_file.sort_unstable();
    let listed: Vec<NodeId> = held.members.iter().map(|m| m.id).collect();
    (in_file != listed).then(|| {
        format!(
            "the config file lists members {in_file:?}, the stored member list {} has \
             {listed:?}; the stored list rules (change it with `bully member`; the file \
             seeded the first start only, its addresses are still dialed)",
            held.id
        )
    })
}

/// The cluster keys whose value in the file is not the cluster's, both values named (a
/// key only one side has is "unset" on the other).
fn settings_differ(held: &Membership, config: &NodeConfig) -> Option<String> {
    let cluster: BTreeMap<String, String> = held.settings.as_ref()?.entries().into_iter().collect();
    let file: BTreeMap<String, String> = file_settings(config).entries().into_iter().collect();
    let unset = || "unset".to_string();
    let mut keys: Vec<&String> = cluster.keys().chain(file.keys()).collect();
    keys.sort();
    keys.dedup();
    // A member without `[postgres]` (a witness) runs no server: its file has no say.
    let compared = |key: &str| config.postgres.is_some() || !key.starts_with(PG_KEYS);
    let differ: Vec<String> = keys
        .into_iter()
        .filter(|key| compared(key) && cluster.get(*key) != file.get(*key))
        .map(|key| {
            let ours = cluster.get(key).cloned().unwrap_or_else(unset);
            let theirs = file.get(key).cloned().unwrap_or_else(unset);
            format!("{key} is {ours} (the file says {theirs})")
        })
        .collect();
    (!differ.is_empty()).then(|| {
        format!(
            "cluster settings differ from the config file: {}; the cluster's rule (member \
             list {}; change them with `bully config set`)",
            differ.join(", "),
            held.id
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

    #[test]
    fn a_cluster_key_in_the_file_is_named_with_both_values() {
        let config = config();
        let list = seed(&config);
        let mut slower = file_settings(&config);
        slower.timing.suspect_after_ms = 3000;
        let held = list.clone().with_settings(slower);
        let said = file_disagrees(&held, &config).expect("differs");
        assert!(
            said.contains("timing.suspect_after_ms is 3000 (the file says 300)"),
            "{said}"
        );
        assert!(!said.contains("heartbeat_ms"), "{said}");
        let mut legacy = list;
        legacy.settings = None;
        assert_eq!(file_disagrees(&legacy, &config), None, "nothing to compare");
    }

    #[test]
    fn the_synchronous_mode_is_filled_from_the_file_and_a_differing_one_named() {
        let mut config = config();
        config.postgres = Some(crate::config::postgres::PostgresConfig::new(
            "/tmp/bully-2-pg",
            "127.0.0.1:5432".parse().unwrap(),
        ));
        let mut list = seed(&config);
        list.settings.as_mut().unwrap().pg_synchronous = None;
        let filled = fill_from_file(list, &config);
        let mode = filled.settings.as_ref().unwrap().pg_synchronous;
        assert_eq!(mode, Some(crate::postgres_rules::Synchronous::Quorum));
        assert!(file_disagrees(&filled, &config).is_none());
        let mut off = filled.clone();
        off.settings.as_mut().unwrap().pg_synchronous =
            Some(crate::postgres_rules::Synchronous::Off);
        let said = file_disagrees(&off, &config).unwrap();
        assert!(
            said.contains("postgres.synchronous is off (the file says quorum)"),
            "{said}"
        );
        let witness = NodeConfig {
            postgres: None,
            ..config
        };
        let said = file_disagrees(&off, &witness).unwrap_or_default();
        assert!(!said.contains("postgres."), "a witness has no say: {said}");
    }
}
