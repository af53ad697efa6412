//! The files of a local icechunk repository, checked before icechunk opens any of them.
//!
//! icechunk reads a local repository through object_store's local file system, which opens
//! files with a blocking `open` (a FIFO with no writer blocks it forever) and follows
//! symbolic links anywhere; icechunk's `Storage` and backend traits are sealed or built
//! only by icechunk, so zarrbuf cannot put its safe opens (`safe_file.rs`) underneath.
//! Instead the repository's directory is walked once when it is opened, reading directory
//! entries only (their types come with them, so a million chunk files cost one `readdir`
//! each, not a `stat` each): a FIFO, socket or device anywhere in it, or a link that leads
//! out of it or to anything but a file or directory, refuses the repository with its path.
//! A file swapped in after the open is not seen; a repository is data at rest.

use super::safe_file::kind_name;
use std::path::Path;

/// Checks every entry below `root` (a repository's directory, its real path); the error
/// names the first entry that is not a regular file, a directory or a link to one inside.
pub(crate) fn check_files(root: &Path) -> Result<(), String> {
    let mut dirs = vec![root.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        let entries =
            std::fs::read_dir(&dir).map_err(|e| format!("cannot list {}: {e}", dir.display()))?;
        for entry in entries {
            let entry = entry.map_err(|e| format!("cannot list {}: {e}", dir.display()))?;
            let kind = entry
                .file_type()
                .map_err(|e| format!("cannot read {}: {e}", entry.path().display()))?;
            let path = entry.path();
            if kind.is_dir() {
                dirs.push(path);
            } else if kind.is_symlink() {
                check_link(root, &path)?;
            } else if !kind.is_file() {
                return Err(format!(
                    "{} is {}, not a file; an icechunk repository holds only files and \
                     directories (remove it, then open the repository again)",
                    path.display(),
                    kind_name(kind)
                ));
            }
        }
    }
    Ok(())
}

/// A link inside the repository must lead to a file or directory inside it (a directory it
/// leads to is walked where it lies).
fn check_link(root: &Path, path: &Path) -> Result<(), String> {
    let Ok(target) = std::fs::canonicalize(path) else {
        // A dangling link reads as a missing object, an error icechunk reports.
        return Ok(());
    };
    if !target.starts_with(root) {
        return Err(format!(
            "{} leads out of the icechunk repository through a symbolic link (to {}); \
             zarrbuf reads only files inside it (copy the file in instead of linking it)",
            path.display(),
            target.display()
        ));
    }
    let kind = std::fs::metadata(&target)
        .map_err(|e| format!("cannot read {}: {e}", target.display()))?
        .file_type();
    if kind.is_file() || kind.is_dir() {
        return Ok(());
    }
    Err(format!(
        "{} is a symbolic link to {}, which is {}; an icechunk repository holds only files \
         and directories (remove it, then open the repository again)",
        path.display(),
        target.display(),
        kind_name(kind)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fifos_devices_and_links_out_are_refused() {
        let base = std::env::temp_dir().join(format!("zarrbuf-icfiles-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        let (repo, out) = (base.join("repo"), base.join("out"));
        std::fs::create_dir_all(repo.join("chunks")).unwrap();
        std::fs::create_dir_all(&out).unwrap();
        std::fs::write(repo.join("chunks/ABC"), b"x").unwrap();
        std::fs::write(out.join("secret"), b"s").unwrap();
        std::os::unix::fs::symlink(repo.join("chunks/ABC"), repo.join("chunks/DEF")).unwrap();
        let repo = std::fs::canonicalize(&repo).unwrap();
        check_files(&repo).unwrap();
        let fifo = repo.join("chunks/FIFO");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
        let err = check_files(&repo).unwrap_err();
        assert!(err.contains("FIFO") && err.contains("chunks/FIFO"), "{err}");
        std::fs::remove_file(&fifo).unwrap();
        std::os::unix::fs::symlink(out.join("secret"), repo.join("chunks/OUT")).unwrap();
        let err = check_files(&repo).unwrap_err();
        assert!(err.contains("leads out"), "{err}");
        std::fs::remove_file(repo.join("chunks/OUT")).unwrap();
        nix::unistd::mkfifo(&out.join("pipe"), nix::sys::stat::Mode::S_IRWXU).unwrap();
        std::os::unix::fs::symlink(out.join("pipe"), repo.join("chunks/P")).unwrap();
        assert!(check_files(&repo).is_err());
        std::fs::remove_dir_all(&base).unwrap();
    }
}
