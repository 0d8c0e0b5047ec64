#!/usr/bin/env python3
"""expect_failure.py MESSAGE COMMAND...: passes only when COMMAND exits 1 and
its output holds MESSAGE (a check that its check can fail, and says why)."""
import subprocess
import sys

done = subprocess.run(sys.argv[2:], capture_output=True, text=True)
output = done.stdout + done.stderr
ok = done.returncode == 1 and sys.argv[1] in output
print(output[-3000:])
print(f"expect_failure: exit {done.returncode}, message {'found' if sys.argv[1] in output else 'missing'}: "
      f"{'PASS' if ok else 'FAIL'}")
sys.exit(0 if ok else 1)
