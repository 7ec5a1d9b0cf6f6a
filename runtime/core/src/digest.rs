//! What a filesystem digest covers: the observation digests recorded with
//! each action (by the sandbox) and compared by [`crate::replay`] are taken
//! over the changed tree without the files listed here. Its own module so
//! that the sandbox, which records digests, and replay, which checks them,
//! both depend on it and not on each other.

use crate::store::object::Tree;

/// Files left out of filesystem digests, as path suffixes (a path matches
/// when it equals the suffix or ends with `/` + suffix). Only files whose
/// content embeds inode numbers, ctimes or mtimes belong here, never whole
/// directories.
pub const DIGEST_EXCLUDED: &[(&str, &str)] = &[(
    ".git/index",
    "git's index caches each file's inode number, ctime and mtime",
)];

/// Whether `path` is left out of filesystem digests.
pub fn is_excluded(path: &str) -> bool {
    DIGEST_EXCLUDED
        .iter()
        .any(|(suffix, _)| path == *suffix || path.ends_with(&format!("/{suffix}")))
}

/// The tree that filesystem digests are computed over: `tree` without the
/// [`DIGEST_EXCLUDED`] files.
pub fn digest_tree(tree: &Tree) -> Tree {
    Tree {
        entries: tree
            .entries
            .iter()
            .filter(|e| !is_excluded(&e.path))
            .cloned()
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layer::test_file as file;

    #[test]
    fn only_git_index_files_are_excluded() {
        assert!(is_excluded(".git/index"));
        assert!(is_excluded("sub/repo/.git/index"));
        assert!(!is_excluded(".git/index.lock.txt"));
        assert!(!is_excluded("my.git/index"));
        assert!(!is_excluded(".git/HEAD"));
        let t = Tree {
            entries: vec![
                file(".git/HEAD", b"1"),
                file(".git/index", b"2"),
                file("a", b"3"),
            ],
        };
        let d = digest_tree(&t);
        assert_eq!(
            d.entries
                .iter()
                .map(|e| e.path.as_str())
                .collect::<Vec<_>>(),
            [".git/HEAD", "a"]
        );
    }
}
