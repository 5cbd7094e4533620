//! How the manager copies this member's data, by what the engine chose
//! (src/postgres_rules/replica_method.rs): `pg_basebackup` from a running server, or
//! the operator's `[postgres] replica_method` restoring a backup. Every copy goes into
//! an empty data dir and leaves it empty again when it fails; a reinit keeps the old
//! data dir aside and puts it back if the copy fails (always with `pg_basebackup`: a
//! backup older than the data it replaces would leave its acknowledged commits on the
//! source alone, src/postgres_rules/replica_method.rs).

use super::super::adopt;
use super::{control, engine_now_ms, files, rules, secrets, Loop};
use crate::postgres_rules::{Copier, Done};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

impl Loop {
    /// A copy (`by`) to stream from `from`, into the (empty or missing) data dir; a
    /// failure is told to the engine, which holds the next `pg_basebackup` back
    /// (src/postgres_rules/copy_backoff.rs) or turns from the replica method to it
    /// (src/postgres_rules/replica_method.rs).
    pub(super) async fn clone_from(&self, from: SocketAddr, by: Copier) -> Result<(), String> {
        let cloned = match by {
            Copier::BaseBackup => self.copy_from(from).await,
            Copier::Method { system_id } => self.restore_for(from, system_id).await,
        };
        if let Err(why) = &cloned {
            // Dated when it failed, not at the look that started it: a clone can run
            // for hours, and the backoff counts from its end.
            let at_ms = engine_now_ms();
            self.done(Done::CopyFailed {
                why: why.clone(),
                at_ms,
                by,
            });
        }
        cloned
    }

    /// Makes the data dir, which must be missing or empty: a copy never writes over
    /// anything.
    fn empty_data_dir(&self) -> Result<(), String> {
        let dir = &self.m.config.data_dir;
        if dir.exists()
            && std::fs::read_dir(dir)
                .map(|mut d| d.next().is_some())
                .unwrap_or(true)
        {
            return Err(format!(
                "{} is not empty and holds no cluster; move it away to let the node clone",
                dir.display()
            ));
        }
        self.make_data_dir()
    }

    /// The libpq connection string a copy from `from` logs in with (as the replication
    /// user, under `application_name`), and the environment libpq's programs need
    /// (`PGPASSFILE`).
    fn copy_login(
        &self,
        from: SocketAddr,
        application_name: &str,
    ) -> Result<(String, Vec<(String, String)>), String> {
        let c = &self.m.config;
        let passfile = self.passfile()?;
        let ca = self.install_tls()?.map(|t| t.ca);
        let user = &c.replication.user;
        let conninfo = files::conninfo(
            from,
            user,
            passfile.as_deref(),
            application_name,
            ca.as_deref(),
        );
        Ok((conninfo, secrets::passfile_env(passfile.as_deref())))
    }

    /// Runs `program` with `args` and `env` into the empty data dir for as long as it
    /// writes into it (`clone_stall_timeout_ms`), then `check`s what it left; on any
    /// failure the data dir is emptied again (a killed program leaves a partial copy
    /// the next try would take for data).
    async fn fill_data_dir(
        &self,
        (program, args, env): (&str, &[String], &[(String, String)]),
        check: impl FnOnce() -> Result<(), String>,
    ) -> Result<(), String> {
        let c = &self.m.config;
        let quiet = Duration::from_millis(c.clone_stall_timeout_ms);
        let filled = self
            .m
            .programs
            .run_while_growing(program, args, env, &c.data_dir, quiet)
            .await
            .and_then(|_| check());
        if let Err(e) = filled {
            return Err(match files::empty_dir(&c.data_dir) {
                Ok(()) => e,
                Err(why) => format!("{e}; and what it left stays: {why}"),
            });
        }
        Ok(())
    }

    /// Runs `[postgres] replica_method` into the empty data dir for a standby of
    /// `from`, checks it restored cluster `system_id` with no setting that would
    /// override bully's or end its replay early. On any failure the data dir is
    /// emptied again, so `pg_basebackup` can go next.
    async fn restore_for(&self, from: SocketAddr, system_id: u64) -> Result<(), String> {
        let c = &self.m.config;
        let dir = &c.data_dir;
        let (program, args) = c
            .replica_method
            .split_first()
            .ok_or("no [postgres] replica_method is set")?;
        self.empty_data_dir()?;
        let (conninfo, mut env) = self.copy_login(from, "bully_restore")?;
        env.extend([
            ("PGDATA".to_string(), dir.display().to_string()),
            ("BULLY_PRIMARY_HOST".into(), from.ip().to_string()),
            ("BULLY_PRIMARY_PORT".into(), from.port().to_string()),
            ("BULLY_PRIMARY_CONNINFO".into(), conninfo),
        ]);
        tracing::info!(%from, %program, "postgres: restoring with the replica method");
        let check = || {
            let restored = control::system_id(dir).unwrap_or(0);
            rules::check_restored(restored, system_id)?;
            adopt::no_settings_overriding_bullys(dir, c.tls)
        };
        if let Err(e) = self.fill_data_dir((program, args, &env), check).await {
            tracing::warn!("postgres: the replica method: {e}; pg_basebackup goes next");
            return Err(format!("the replica method: {e}"));
        }
        // A backup tool may leave its own recovery signal (pgBackRest writes one):
        // bully's standby settings and signal are written at the start that follows.
        let _ = std::fs::remove_file(dir.join("recovery.signal"));
        Ok(())
    }

    /// `pg_basebackup` from `from` into the empty data dir.
    async fn copy_from(&self, from: SocketAddr) -> Result<(), String> {
        let c = &self.m.config;
        self.empty_data_dir()?;
        // The application name is pg_basebackup's own: its WAL stream must not pass for
        // a standby (`bully_<id>`) in the primary's pg_stat_replication.
        let (source, env) = self.copy_login(from, "pg_basebackup")?;
        let args = vec![
            "-D".to_string(),
            c.data_dir.display().to_string(),
            format!("--dbname={source}"),
            "-X".into(),
            "stream".into(),
            "-c".into(),
            "fast".into(),
            "-w".into(),
        ];
        tracing::info!(%from, "postgres: cloning (pg_basebackup)");
        // pg_basebackup removes what it wrote when it fails, but not when it is killed
        // (a stall): emptied again all the same.
        let program = ("pg_basebackup", args.as_slice(), env.as_slice());
        self.fill_data_dir(program, || Ok(())).await
    }

    /// A fresh clone from `from` with the old data dir kept aside, then a start as its
    /// standby. If the clone fails the old data comes back: a member without data no
    /// longer counts toward the promotion check's majority (the simulator's seed 55940).
    pub(super) async fn reinit_from(
        &mut self,
        from: std::net::SocketAddr,
        by: Copier,
    ) -> Result<Copier, String> {
        let aside = self.move_aside()?;
        if let Err(e) = self.clone_from(from, by).await {
            let Some(aside) = aside else {
                return Err(e);
            };
            self.put_back(&aside)?;
            return Err(format!("{e}; the old data dir is back in place"));
        }
        self.note_cloned();
        self.done(Done::Copied { by });
        self.start_server(Some(from), true).await?;
        Ok(by)
    }

    /// Renames the data dir to `<data_dir>.aside.<unix seconds>` (a number more if
    /// that exists): bully never deletes a data dir set aside. Returns where it went,
    /// `None` when there was no data dir to set aside.
    fn move_aside(&self) -> Result<Option<PathBuf>, String> {
        let dir = &self.m.config.data_dir;
        if !dir.exists() {
            return Ok(None);
        }
        let seconds = crate::wall_clock::wall_ms() / 1000;
        let aside = (0..)
            .map(|n| {
                let mut aside = dir.clone().into_os_string();
                match n {
                    0 => aside.push(format!(".aside.{seconds}")),
                    n => aside.push(format!(".aside.{seconds}.{n}")),
                }
                PathBuf::from(aside)
            })
            .find(|aside| !aside.exists())
            .expect("some name is free");
        std::fs::rename(dir, &aside)
            .map_err(|e| format!("cannot move {} aside: {e}", dir.display()))?;
        tracing::warn!(aside = %aside.display(), "postgres: the old data dir is kept aside");
        Ok(Some(aside))
    }

    /// Puts the data dir moved `aside` back in place of what a failed clone left.
    fn put_back(&self, aside: &std::path::Path) -> Result<(), String> {
        let dir = &self.m.config.data_dir;
        if dir.exists() {
            std::fs::remove_dir_all(dir)
                .map_err(|e| format!("cannot remove the failed clone {}: {e}", dir.display()))?;
        }
        std::fs::rename(aside, dir)
            .map_err(|e| format!("cannot put {} back: {e}", aside.display()))?;
        tracing::warn!(dir = %dir.display(), "postgres: the clone failed; the old data dir is back");
        Ok(())
    }
}
