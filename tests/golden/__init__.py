"""The golden corpus: match logs written by earlier releases, replayed by every later one."""
