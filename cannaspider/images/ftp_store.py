"""Reading a stored image back from an FTP server, as the pipeline wrote it through Scrapy's
FTPFilesStore: the same credentials (the URI's, else FTP_USER / FTP_PASSWORD), the same passive or
active mode (FEED_STORAGE_FTP_ACTIVE) and the same file names (`<the URI's path>/<path>`).

The password is only ever handed to ftplib: the reader's identity, in every log line, ETag and
error, names the host, port and folder alone.
"""

from __future__ import annotations

import ftplib
from urllib.parse import urlparse

from scrapy.settings import BaseSettings

from cannaspider.images.store_reader import StoreConfigError, StoreUnavailable, object_key


class FTPReader:
    """An FTP server, with ftplib, as FTPFilesStore: the URI's user and password, else FTP_USER
    and FTP_PASSWORD; active mode when FEED_STORAGE_FTP_ACTIVE. One connection per read."""

    def __init__(self, uri: str, settings: BaseSettings, *, timeout: float):
        u = urlparse(uri)
        if not u.hostname:
            raise StoreConfigError("IMAGES_STORE ftp:// names no host")
        self.host = u.hostname
        self.port = int(u.port or 21)
        self.username = u.username or settings["FTP_USER"]
        self.password = u.password or settings["FTP_PASSWORD"]
        self.active = settings.getbool("FEED_STORAGE_FTP_ACTIVE")
        self.basedir = u.path.rstrip("/")
        self.timeout = timeout
        self.identity = f"ftp://{self.host}:{self.port}{self.basedir}/"

    def key(self, path: str) -> str:
        return object_key(f"{self.basedir}/", path)

    def read(self, path: str) -> bytes | None:
        target = self.key(path)
        chunks: list[bytes] = []
        try:
            with ftplib.FTP(timeout=self.timeout) as ftp:
                ftp.connect(self.host, self.port)
                ftp.login(self.username, self.password)
                if self.active:
                    ftp.set_pasv(False)
                ftp.retrbinary(f"RETR {target}", chunks.append)
        except ftplib.error_perm as exc:
            code = str(exc)[:3]
            if code == "550":  # no such file (or folder)
                return None
            raise StoreUnavailable(502, f"{self.identity} refused the read (FTP {code})") from None
        except ftplib.error_temp as exc:
            raise StoreUnavailable(503, f"{self.identity} answered FTP {str(exc)[:3]}") from None
        except (OSError, EOFError, ftplib.Error) as exc:
            raise StoreUnavailable(503, f"{self.identity} cannot be reached ({type(exc).__name__})") from None
        return b"".join(chunks)
