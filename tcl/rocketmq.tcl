# rocketmq.tcl: the Tcl package rocketmq, which loads the sqlite-rocketmq
# extension into a connection of SQLite's Tcl package:
#
#     package require rocketmq
#     sqlite3 db app.db
#     rocketmq::load db
#     db eval {CREATE VIRTUAL TABLE mq USING rocketmq(dir='app-store')}
#
# `make install` puts it, with its pkgIndex.tcl, into $(LIBDIR)/tcltk/rocketmq,
# which tclsh's auto_path holds for LIBDIR /usr/lib and /usr/local/lib (set
# TCLLIBPATH for another one). The extension is $(LIBDIR)/sqlite3/rocketmq.so,
# found from this file's directory, so installs under DESTDIR work as well.

package require sqlite3

namespace eval ::rocketmq {
  variable extension [file normalize [file join [file dirname [info script]] .. .. sqlite3 rocketmq]]
}

# rocketmq::load DB: loads the extension into the connection DB. Extension
# loading is enabled for this call only.
proc ::rocketmq::load {db} {
  variable extension
  $db enable_load_extension 1
  try {
    $db eval {SELECT load_extension($extension)}
  } finally {
    $db enable_load_extension 0
  }
}
