//! The `BULLY_*` environment hooks and health checks run with (listed in [`super::hooks`]):
//! one builder, so a hook and a health check never see the same fact spelled twice.

use crate::api::Status;
use crate::node::policy::transitions::Transition;
use std::path::Path;

/// The `BULLY_*` variables for a hook (with its transition) or a health check.
pub fn environment(
    status: &Status,
    transition: Option<&Transition>,
    data_dir: &Path,
) -> Vec<(String, String)> {
    fn text(value: Option<impl ToString>) -> String {
        value.map(|v| v.to_string()).unwrap_or_default()
    }
    let epoch = status.coordinator().and(status.epoch);
    let token = status.token();
    let mut env = vec![
        ("BULLY_NODE_ID".to_string(), status.id.to_string()),
        ("BULLY_ROLE".to_string(), status.role.to_string()),
        ("BULLY_MODE".to_string(), status.mode.to_string()),
        ("BULLY_EPOCH".to_string(), text(token)),
        ("BULLY_TOKEN".to_string(), text(token)),
        ("BULLY_TERM".to_string(), text(epoch.map(|e| e.term))),
        (
            "BULLY_EPOCH_LEADER".to_string(),
            text(epoch.map(|e| e.leader)),
        ),
        ("BULLY_COORDINATOR".to_string(), text(status.coordinator())),
        (
            "BULLY_ELIGIBLE".to_string(),
            if status.eligible { "1" } else { "0" }.to_string(),
        ),
        (
            "BULLY_DATA_DIR".to_string(),
            std::path::absolute(data_dir)
                .unwrap_or_else(|_| data_dir.to_path_buf())
                .display()
                .to_string(),
        ),
    ];
    if let Some(t) = transition {
        let previous = t.previous_epoch;
        env.push((
            "BULLY_PREVIOUS_COORDINATOR".to_string(),
            text(previous.map(|e| e.leader)),
        ));
        env.push((
            "BULLY_PREVIOUS_EPOCH".to_string(),
            text(previous.map(|e| e.token())),
        ));
    }
    env
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::{Cells, Mode, Role, View};

    #[test]
    fn data_dir_is_absolute_for_hooks_running_elsewhere() {
        let status = Status::initial(
            View::new(1, Role::Follower),
            Mode::Quorum,
            Cells::default(),
            &[],
            0,
        );
        let env = environment(&status, None, Path::new("data/node1"));
        let dir = &env.iter().find(|(k, _)| k == "BULLY_DATA_DIR").unwrap().1;
        let dir = Path::new(dir);
        assert!(dir.is_absolute(), "{}", dir.display());
        assert_eq!(dir, std::env::current_dir().unwrap().join("data/node1"));
    }
}
