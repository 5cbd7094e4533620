//! Fingerprints of worlds and the sets that hold them: the search's hot loop hashes
//! every new state once and looks fingerprints up several times per state.
//!
//! A fingerprint is SipHash-1-3 (the standard library's `DefaultHasher`) of the bytes
//! `#[derive(Hash)]` writes for a [`World`]. Those writes are many and tiny (a byte for
//! each enum tag, eight for each number); SipHash handles each one slowly, so the
//! bytes are gathered first and hashed in one go. SipHash is a stream hash, so the
//! fingerprint is the same value as hashing field by field (a unit test below checks
//! that): state counts and counterexamples do not change. Fingerprints are already
//! uniform 64-bit values, so the sets keyed by them use them as their own hash instead
//! of hashing them again.

use super::World;
use std::collections::hash_map::DefaultHasher;
use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasherDefault, Hash, Hasher};

/// A world's 64-bit fingerprint: what the search keeps of each visited state (hash
/// compaction).
pub(super) fn fingerprint(w: &World) -> u64 {
    let mut gathered = Gathered(Vec::with_capacity(1024));
    w.hash(&mut gathered);
    let mut h = DefaultHasher::new();
    h.write(&gathered.0);
    h.finish()
}

/// Collects the bytes written to it, to be hashed at once by [`fingerprint`].
struct Gathered(Vec<u8>);

impl Hasher for Gathered {
    fn write(&mut self, bytes: &[u8]) {
        self.0.extend_from_slice(bytes);
    }

    fn finish(&self) -> u64 {
        unreachable!("fingerprint() hashes the gathered bytes itself")
    }
}

/// A set of fingerprints.
pub(super) type FingerprintSet = HashSet<u64, BuildHasherDefault<Prehashed>>;

/// A map keyed by fingerprints.
pub(super) type FingerprintMap<V> = HashMap<u64, V, BuildHasherDefault<Prehashed>>;

/// A hasher for keys that are already hashes: the key is its own hash.
#[derive(Default)]
pub(super) struct Prehashed(u64);

impl Hasher for Prehashed {
    fn write(&mut self, bytes: &[u8]) {
        // Only u64 keys are hashed here; fold anything else in all the same.
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(b);
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Bounds, Model, ModelConfig};
    use crate::protocol::{Mode, Preempt};

    /// The gathered fingerprint equals SipHash fed field by field, the way it was
    /// computed before: the same worlds, the same fingerprints.
    #[test]
    fn gathering_keeps_the_fingerprint() {
        let config = ModelConfig {
            ids: vec![1, 2, 3],
            mode: Mode::Quorum,
            witness: None,
            preempt: Preempt::Always,
            timing: ModelConfig::small_timing(),
            flaw: None,
            bounds: Bounds {
                depth: 1,
                time: 1,
                crashes: 0,
                wipes: 0,
                partitions: 0,
                pauses: 0,
                health_flips: 0,
                term: 1,
                liveness_steps: 400,
            },
            settled_start: true,
            joining: None,
            changes: Vec::new(),
            estimates: Vec::new(),
            restart_timing: None,
            release_bound_ms: None,
        };
        let model = Model::new(config);
        let world = model.initial().expect("the start-up settles");
        let mut direct = DefaultHasher::new();
        world.hash(&mut direct);
        assert_eq!(fingerprint(&world), direct.finish());
    }
}
