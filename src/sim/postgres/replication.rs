//! Commits, streaming and acknowledgements. The primary writes a few commits a step;
//! each standby streams from its upstream while its WAL is a prefix of the upstream's
//! and the upstream still holds its next position (a standby on another branch, cut
//! off, lagging or past the upstream's retention does not: it may replay from the
//! archive, src/sim/postgres/archive.rs); a commit is
//! acknowledged once k of the standbys named in the primary's
//! `synchronous_standby_names` stream from it and flushed it (k = 0: at once).

use super::log::Event;
use super::server::{parse_names, State};
use super::world::{Acked, World};
use super::Sabotage;
use crate::protocol::NodeId;
use rand::Rng;

impl World {
    /// Every running primary takes 0 to 2 commits (clients write to whatever accepts).
    pub(super) fn commit(&mut self) {
        let primaries: Vec<NodeId> = self
            .data_members()
            .filter(|m| m.pg.as_ref().is_some_and(|d| d.primary()))
            .map(|m| m.id)
            .filter(|&id| !self.server_stalled(id))
            .collect();
        for id in primaries {
            let count = self.rng.gen_range(0..3u64);
            if count == 0 {
                continue;
            }
            let first = self.next_commit;
            self.next_commit += count;
            let d = self.member_mut(id).pg.as_mut().expect("a primary");
            for commit in first..first + count {
                d.pending.push((d.wal.len(), commit));
                d.wal.commits.push(commit);
            }
            self.summary.commits += count;
            self.event(Event::Committed { id, first, count });
        }
    }

    /// Each running standby streams a little from its upstream, if it can.
    pub(super) fn replicate(&mut self) {
        let ids: Vec<NodeId> = self.data_members().map(|m| m.id).collect();
        for id in ids {
            let m = self.member(id);
            let Some(State::Standby { upstream, .. }) = m.pg.as_ref().map(|d| d.state) else {
                continue;
            };
            let lagging =
                m.lagging_until > self.now || m.refused_until > self.now || self.server_stalled(id);
            let own = m.pg.as_ref().map_or(0, |d| d.wal.len());
            let source = upstream
                .filter(|&u| u != id && self.reach(id, u) && !self.server_stalled(u))
                .filter(|&u| {
                    let up = self.member(u).pg.as_ref().filter(|d| d.running());
                    // Its next position must still be on the upstream (retention.rs),
                    // and PostgreSQL streams only between servers of one system
                    // ("database system identifier differs").
                    up.zip(m.pg.as_ref()).is_some_and(|(up, own)| {
                        own.system_id == up.system_id
                            && own.wal.follows(&up.wal)
                            && own.wal.len() >= up.kept_from
                    })
                });
            let streaming = source.is_some() && !lagging;
            let chunk = self.rng.gen_range(1..4);
            let received = source.filter(|_| !lagging).map(|u| {
                let up = self.member(u).pg.as_ref().expect("a running upstream");
                let upto = up.wal.len().min(own + chunk);
                (up.wal.commits[own..upto].to_vec(), up.wal.forks.clone())
            });
            // Past what its upstream keeps: what the archive bridges (archive.rs).
            let replayed = match (&received, upstream) {
                (None, Some(u)) if !lagging && u != id && self.reach(id, u) => {
                    let up = self.member(u).pg.as_ref().filter(|d| d.running());
                    up.zip(self.member(id).pg.as_ref())
                        .and_then(|(up, own)| self.replay_archived(own, up, chunk))
                }
                _ => None,
            };
            self.summary.archive_replays += u64::from(replayed.is_some());
            let d = self.member_mut(id).pg.as_mut().expect("a standby");
            d.state = State::Standby {
                upstream,
                streaming,
            };
            if streaming {
                d.method_copy = None;
            }
            if let Some((commits, forks)) = received.or(replayed) {
                d.wal.receive(&commits, &forks);
            }
        }
    }

    /// Each primary acknowledges, in order, the commits enough named standbys flushed.
    pub(super) fn acknowledge(&mut self) {
        let primaries: Vec<NodeId> = self
            .data_members()
            .filter(|m| {
                m.pg.as_ref()
                    .is_some_and(|d| d.primary() && !d.pending.is_empty())
            })
            .map(|m| m.id)
            .collect();
        for id in primaries {
            let d = self.member(id).pg.as_ref().expect("a primary");
            let (named_k, named) = parse_names(&d.names);
            let k = match (self.spec.sabotage, d.decided) {
                (Some(Sabotage::KMinusOne), true) => named_k.saturating_sub(1),
                _ => named_k,
            };
            let weak = self.weak(id);
            let alone_in = self
                .member(id)
                .engine
                .memory()
                .committed
                .as_ref()
                .filter(|r| r.alone && r.primary == id && named_k <= r.k)
                .map(|r| r.token);
            let standbys: Vec<&super::server::Data> = named
                .iter()
                .filter(|&&s| s != id && (s as usize) <= self.spec.members)
                .filter_map(|&s| self.member(s).pg.as_ref())
                .filter(|s| {
                    s.state
                        == State::Standby {
                            upstream: Some(id),
                            streaming: true,
                        }
                })
                .collect();
            let done = d
                .pending
                .iter()
                .take_while(|&&(pos, commit)| {
                    standbys.iter().filter(|s| s.wal.holds(pos, commit)).count() >= k
                })
                .count();
            if done == 0 {
                continue;
            }
            let d = self.member_mut(id).pg.as_mut().expect("a primary");
            let newly: Vec<(usize, u64)> = d.pending.drain(..done).collect();
            let upto = newly.last().map_or(0, |&(_, c)| c);
            self.acked
                .extend(newly.into_iter().map(|(pos, commit)| Acked {
                    id: commit,
                    pos,
                    weak,
                    destroyed: false,
                    alone_in,
                    accepted: false,
                }));
            self.event(Event::Acknowledged {
                by: id,
                upto,
                k,
                weak,
            });
        }
    }
}
