//! Peers coming and going: what the transport's notices and any message say about who
//! is reachable, the waits that end once that is known, and what a (re)connected or
//! (re)starting peer is told. Rules of docs/design.md:
//!
//! - startup_wait: a starting node also waits until every higher peer has been up, so
//!   nodes started one by one do not each declare before the next one connects: 3D, or
//!   D after the last higher peer came up if that is later (never past 3D after the
//!   probe window); a running coordinator's claim ends the wait.
//! - election: which higher peers count as reachable and may still answer (the
//!   rule's text is in `election.rs`).
//! - peer_up: a peer that (re)connects gets the probe, Election, pre-vote, declaration,
//!   epoch or (from anyone else) the Ack a probe would have got, which it may have
//!   missed while its link was down.

use super::state::{Reach, State};
use super::Machine;
use crate::protocol::epoch::{Millis, NodeId};
use crate::protocol::message::Body;

impl Machine {
    /// The transport (re)connected to `peer`.
    pub(super) fn on_peer_up(&mut self, peer: NodeId, now: Millis) {
        self.reach.insert(peer, Reach::Up);
        self.forget_push(peer);
        self.extend_startup_wait(peer, now);
        self.repeat_to(peer, now);
        self.on_reach_change(now);
    }

    /// peer_up: repeat the message a (re)connected peer may have missed.
    fn repeat_to(&mut self, peer: NodeId, now: Millis) {
        match self.state {
            State::Starting { .. } => self.send(peer, Body::Probe),
            State::Follower { epoch, .. } if epoch.leader == peer => self.greet_leader(epoch, now),
            State::Electing { .. } if self.higher_peers().contains(&peer) => self.send(
                peer,
                Body::Election {
                    accepted: self.cells.accepted,
                },
            ),
            State::PreVoting { term, .. } => {
                let heard = self.quorum_state().heard;
                self.send(peer, Body::PreVote { term, heard })
            }
            State::Declaring { epoch, .. } => self.send(peer, Body::Coordinator { epoch }),
            // What our reply to its probe said (a coordinator's heartbeat, anyone else's
            // accepted epoch): the dialer may have restarted and its probe's answer was
            // dropped while our link to it was still down.
            _ => self.on_probe(peer),
        }
    }

    /// A (re)starting peer asks what it missed: a coordinator heartbeats it, anyone
    /// else tells it the epoch it accepted.
    pub(super) fn on_probe(&mut self, from: NodeId) {
        match self.state {
            State::Coordinator { epoch, .. } => {
                let round = self.current_round();
                self.send(from, Body::Heartbeat { epoch, round })
            }
            _ => self.send(
                from,
                Body::Ack {
                    accepted: self.cells.accepted,
                    round: 0,
                },
            ),
        }
    }

    /// The transport lost its link to `peer`: a leader we follow is suspected at once,
    /// and an election that only waits for unreachable peers goes on.
    pub(super) fn on_peer_down(&mut self, peer: NodeId, now: Millis) {
        let down = match self.reach.get(&peer) {
            Some(Reach::Up | Reach::Lost) => Reach::Lost,
            _ => Reach::Unreached,
        };
        self.reach.insert(peer, down);
        self.forget_est(peer);
        if matches!(self.state, State::Follower { epoch, .. } if epoch.leader == peer) {
            self.suspect(now);
        }
        self.on_reach_change(now);
    }

    /// A valid message from `from` proves it alive, whatever the transport said last.
    /// Returns whether that is news (the caller then re-checks its waits).
    pub(super) fn heard_from(&mut self, from: NodeId) -> bool {
        // A heartbeat clears this again when it is followed (`follow`).
        self.leader_heard |=
            matches!(self.state, State::Follower { epoch, .. } if epoch.leader == from);
        let was_suspected = self.suspected == Some(from);
        if was_suspected {
            self.suspected = None;
        }
        self.reach.insert(from, Reach::Up) != Some(Reach::Up) || was_suspected
    }

    /// Waits that depend on reachability end as soon as they can: the start-up wait once
    /// every higher peer is known, an election once no higher peer is left to answer.
    pub(super) fn on_reach_change(&mut self, now: Millis) {
        match self.state {
            State::Starting { until, .. }
                if now >= until && self.higher_resolved() && self.recovery.is_none() =>
            {
                self.start_election(now)
            }
            State::Electing { .. } if self.reachable_higher().is_empty() => {
                self.conclude_election(now)
            }
            _ => {}
        }
    }

    /// Whether every higher peer has been up since this start (a peer the transport
    /// merely could not reach yet may be starting too: a fresh cluster waits for it).
    pub(super) fn higher_resolved(&self) -> bool {
        self.higher_peers()
            .iter()
            .all(|p| matches!(self.reach.get(p), Some(Reach::Up | Reach::Lost)))
    }

    /// Higher peers that could still answer an Election: not known to be down.
    pub(super) fn reachable_higher(&self) -> Vec<NodeId> {
        let mut higher = self.higher_peers();
        higher.retain(|&p| self.reaches(p));
        higher
    }

    /// Whether this node counts `peer` as one its Election may reach: not reported down
    /// by the transport, not the leader whose heartbeats stopped.
    fn reaches(&self, peer: NodeId) -> bool {
        matches!(self.reach.get(&peer), None | Some(Reach::Up)) && self.suspected != Some(peer)
    }

    /// startup_wait: while higher peers keep coming up, the cluster is still starting:
    /// wait up to D after each one for the next, never past 3D after the probe window.
    fn extend_startup_wait(&mut self, peer: NodeId, now: Millis) {
        if let State::Starting { until, give_up } = self.state {
            let timing = self.config.timing;
            let cap = until + timing.startup_wait_ms();
            let later = (now + timing.suspect_after_ms).min(cap);
            if peer > self.config.id && later > give_up && !self.higher_resolved() {
                self.state = State::Starting {
                    until,
                    give_up: later,
                };
            }
        }
    }

    /// A coordinator's claim or heartbeat reached a starting node: the cluster is
    /// running, so a start-up wait for peers that may never come is pointless (a later
    /// higher PeerUp may still extend it, within the cap).
    pub(super) fn running_cluster_seen(&mut self) {
        if let State::Starting { until, .. } = self.state {
            self.state = State::Starting {
                until,
                give_up: until,
            };
        }
    }
}
