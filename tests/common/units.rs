//! `systemd-analyze verify` of bully's three unit files, wherever they are: config/ in
//! the checkout (tests/systemd.rs) or /usr/lib/systemd/system after the Debian package
//! is installed (tests/deb_package.rs).

use std::path::Path;
use std::process::Command;

/// Each unit file and the name it is verified as: the template as one instance.
const UNITS: [(&str, &str); 3] = [
    ("bully.service", "bully.service"),
    ("bully@.service", "bully@node1.service"),
    ("bully-run.service", "bully-run.service"),
];

/// Verifies the unit files found in `dir`, copied to a temp dir with `ExecStart`'s
/// `/usr/local/bin/bully` replaced by `exec` when given (verify checks that the program
/// exists). Err: verify's exit status and output. Verify exits 0 on some problems (an
/// unknown `Type=`), so any warning on stderr is an error too.
pub fn verify(dir: &Path, exec: Option<&Path>) -> Result<(), String> {
    let copies = tempfile::tempdir().map_err(|e| e.to_string())?;
    let mut units = Vec::new();
    for (file, instance) in UNITS {
        let text = std::fs::read_to_string(dir.join(file))
            .map_err(|e| format!("{}: {e}", dir.join(file).display()))?;
        let text = match exec {
            Some(exec) => text.replace("/usr/local/bin/bully", &exec.display().to_string()),
            None => text,
        };
        std::fs::write(copies.path().join(file), text).map_err(|e| e.to_string())?;
        if file != instance {
            std::os::unix::fs::symlink(file, copies.path().join(instance))
                .map_err(|e| e.to_string())?;
        }
        units.push(copies.path().join(instance));
    }
    let out = Command::new("systemd-analyze")
        .arg("verify")
        .args(&units)
        .output()
        .map_err(|e| format!("systemd-analyze: {e}"))?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    if out.status.success() && stderr.trim().is_empty() {
        Ok(())
    } else {
        Err(format!("systemd-analyze verify: {}\n{stderr}", out.status))
    }
}
