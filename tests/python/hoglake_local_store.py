"""A local-directory stand-in for pyhoglake's S3 configuration.

pyhoglake's ``HoglakeClient(s3=...)`` only calls ``s3.filesystem()`` on a
duck-typed object that has no ``put_client`` (its own test doubles work this
way), so the parquet it "uploads" can land in a temp directory: the object
``s3://bucket/key`` is written to ``<root>/bucket/key``. The catalog still
sees ordinary ``s3://`` paths, which is what hoglake requires of a data_path.
Every written key is recorded so checks can read the objects back.
"""

from __future__ import annotations

import os
import threading

import pyarrow.fs as pafs


class _CreatingHandler(pafs.FileSystemHandler):
    """LocalFileSystem under ``root`` that creates parent directories on write (as S3 needs none)."""

    def __init__(self, root: str, written: list[str], lock: threading.Lock) -> None:
        self._root = root
        self._fs = pafs.SubTreeFileSystem(root, pafs.LocalFileSystem())
        self._written = written
        self._lock = lock

    def get_type_name(self) -> str:
        return "hoglake-local-store"

    def normalize_path(self, path: str) -> str:
        return path

    def get_file_info(self, paths: list[str]) -> list[pafs.FileInfo]:
        return self._fs.get_file_info(paths)

    def get_file_info_selector(self, selector: pafs.FileSelector) -> list[pafs.FileInfo]:
        return self._fs.get_file_info(selector)

    def create_dir(self, path: str, recursive: bool) -> None:
        self._fs.create_dir(path, recursive=recursive)

    def delete_dir(self, path: str) -> None:
        self._fs.delete_dir(path)

    def delete_dir_contents(self, path: str, missing_dir_ok: bool = False) -> None:
        self._fs.delete_dir_contents(path, missing_dir_ok=missing_dir_ok)

    def delete_root_dir_contents(self) -> None:
        self._fs.delete_dir_contents("", accept_root_dir=True)

    def delete_file(self, path: str) -> None:
        self._fs.delete_file(path)

    def move(self, src: str, dest: str) -> None:
        self._fs.move(src, dest)

    def copy_file(self, src: str, dest: str) -> None:
        self._fs.copy_file(src, dest)

    def open_input_stream(self, path: str):
        return self._fs.open_input_stream(path)

    def open_input_file(self, path: str):
        return self._fs.open_input_file(path)

    def open_output_stream(self, path: str, metadata):
        os.makedirs(os.path.dirname(os.path.join(self._root, path)), exist_ok=True)
        with self._lock:
            self._written.append(path)
        return self._fs.open_output_stream(path)

    def open_append_stream(self, path: str, metadata):
        return self._fs.open_append_stream(path)


class LocalObjectStore:
    """What pyhoglake needs from ``S3Config``: ``filesystem()`` (and nothing that enables boto3)."""

    def __init__(self, root: str) -> None:
        self.root = root
        self.written: list[str] = []
        self._lock = threading.Lock()
        self._fs = pafs.PyFileSystem(_CreatingHandler(root, self.written, self._lock))

    def filesystem(self) -> pafs.FileSystem:
        """The filesystem pyhoglake opens its output streams on (keys are ``bucket/key``)."""
        return self._fs

    def local_path(self, uri: str) -> str:
        """Where ``s3://bucket/key`` was written."""
        if not uri.startswith("s3://"):
            raise ValueError(f"not an s3:// uri: {uri}")
        return os.path.join(self.root, uri[len("s3://") :])
