//! The host-side file API: each operation is performed by the helper as the
//! sandbox's root, inside the sandbox root (see [`super::protocol::FileOp`]);
//! writes and deletions are recorded as actions.

use super::protocol::{FileOp, FileResult, Request, Response};
use super::{ListEntry, Result, Sandbox, SandboxError};
use crate::store::object::{Action, ExitStatus, ObjectKind};

impl Sandbox {
    pub(super) fn file(&mut self, op: FileOp) -> Result<FileResult> {
        match self.helper.request(&Request::File(op))? {
            Response::File(FileResult::Failed { message }) => Err(SandboxError::File(message)),
            Response::File(r) => Ok(r),
            other => Err(self.helper.unexpected(other)),
        }
    }

    /// Read a file of the workspace (path relative to `/workspace`).
    pub fn read_file(&mut self, path: &str) -> Result<Vec<u8>> {
        match self.file(FileOp::Read {
            path: path.to_owned(),
        })? {
            FileResult::Data { data } => Ok(data),
            other => Err(SandboxError::Protocol {
                what: format!("unexpected file result {other:?}"),
            }),
        }
    }

    /// List a directory of the workspace (`""` for its root), sorted by name.
    pub fn list_dir(&mut self, path: &str) -> Result<Vec<ListEntry>> {
        match self.file(FileOp::List {
            path: path.to_owned(),
        })? {
            FileResult::Entries { entries } => Ok(entries),
            other => Err(SandboxError::Protocol {
                what: format!("unexpected file result {other:?}"),
            }),
        }
    }

    /// Create or replace a file (parents created), recorded as an action.
    pub fn write_file(&mut self, path: &str, data: &[u8], mode: u32) -> Result<()> {
        if data.len() > super::protocol::MAX_FILE {
            return Err(SandboxError::File(format!(
                "write {path}: {} bytes; the file API moves at most {} in one write",
                data.len(),
                super::protocol::MAX_FILE
            )));
        }
        self.file(FileOp::Write {
            path: path.to_owned(),
            data: data.to_vec(),
            mode,
        })?;
        self.delta_cache = None;
        let content = self.hold(ObjectKind::Blob, data.to_vec());
        self.record(
            Action::WriteFile {
                path: path.to_owned(),
                content,
                mode,
            },
            b"",
            b"",
            ExitStatus::Code { code: 0 },
        )?;
        Ok(())
    }

    /// Delete a file or symlink, recorded as an action.
    pub fn delete_file(&mut self, path: &str) -> Result<()> {
        self.file(FileOp::Delete {
            path: path.to_owned(),
        })?;
        self.delta_cache = None;
        self.record(
            Action::DeleteFile {
                path: path.to_owned(),
            },
            b"",
            b"",
            ExitStatus::Code { code: 0 },
        )?;
        Ok(())
    }
}
