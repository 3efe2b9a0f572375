"""Which OS errors are the user's to fix, by hand (prefixsim/errors.py `os_error_number`,
`is_users_os_error`; docs/input-rules.md I19)."""

import errno

from prefixsim.errors import is_users_os_error, os_error_number


def test_the_errno_of_an_os_error_or_of_arrows_text():
    assert os_error_number(OSError(errno.ENOSPC, "No space left")) == errno.ENOSPC
    assert os_error_number(OSError("IOError: [Errno 28] Error writing bytes")) == 28
    assert os_error_number(OSError("[ERRNO 122] quota")) == 122  # any case
    assert os_error_number(OSError("no number here")) is None
    assert os_error_number(OSError("[errno x] no digits")) is None


def test_the_users_errors():
    for number in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.ENAMETOOLONG,
                   errno.EACCES, errno.EPERM, errno.EROFS):
        assert is_users_os_error(OSError(number, "x"))
    assert is_users_os_error(OSError("[errno 28] from Arrow"))
    assert not is_users_os_error(OSError(errno.EIO, "Input/output error"))
    assert not is_users_os_error(OSError("no number"))
