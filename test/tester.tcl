# tester.tcl: the test harness of the Tcl tests, in the style of SQLite's.
#
# A test file starts with
#
#     source [file join [file dirname [info script]] tester.tcl]
#
# and ends with `finish_test`. It then has:
#
#   db                   a connection to a fresh database file in a
#                        temporary directory, with the extension loaded
#   load_rmq DB          load the extension into another connection DB
#   tmpdir               a fresh, empty directory under /tmp; every one is
#                        removed by finish_test
#   execsql SQL ?DB?     the rows of SQL as a flat list (NULL is {})
#   catchsql SQL ?DB?    {0 rows} or {1 {error message}}
#   do_test NAME SCRIPT EXPECTED
#   do_execsql_test NAME SQL EXPECTED     EXPECTED is a flat list of values
#   do_catchsql_test NAME SQL EXPECTED    e.g. {1 {no such table: x}}
#   do_eqp_test NAME SQL EXPECTED         the `detail` lines of EXPLAIN QUERY
#                                         PLAN, one per line
#   small_store DIR ?ARG...?   the arguments of a rocketmq table in DIR with
#                        small files (the test leaves little on disk), then ARGs
#   finish_test          prints "tests: N passed, N failed; checks: 0 passed,
#                        0 failed" (each do_*_test is one named test; the Tcl
#                        tests make no separate checks); exits 1 on failure
#
# As in SQLite, an EXPECTED of the form /RE/ must match as a regular
# expression and one of the form *GLOB* as a glob pattern. SQL and scripts
# run in the caller's scope, so `$var` in SQL binds the caller's variable.
#
# The environment (set by test/run.sh; the defaults suit a run from a
# checkout built with `make`):
#   RMQ_EXT      the extension to load (default build/rocketmq)
#   RMQ_BUILD    the build directory (default build)
#   RMQ_GOLDEN   the golden RocketMQ stores (default test/golden)
# available as ::rmq_ext, ::rmq_build, ::rmq_golden; ::rmq_root is the
# repository root.

package require sqlite3

set ::rmq_root [file normalize [file join [file dirname [info script]] ..]]
proc rmq_env {name default} {
  if {[info exists ::env($name)] && $::env($name) ne ""} { return $::env($name) }
  return $default
}
set ::rmq_build [rmq_env RMQ_BUILD [file join $::rmq_root build]]
set ::rmq_ext [rmq_env RMQ_EXT [file join $::rmq_build rocketmq]]
set ::rmq_golden [rmq_env RMQ_GOLDEN [file join $::rmq_root test golden]]

set ::nPass 0
set ::nFail 0
set ::failList {}
set ::tmpdirs {}
set ::tmpseq 0

proc tmpdir {} {
  while 1 {
    set d [format /tmp/rmq-test-%d-%d-%06d [pid] [incr ::tmpseq] [expr {int(rand()*1000000)}]]
    if {![file exists $d]} break
  }
  file mkdir $d
  lappend ::tmpdirs $d
  return $d
}

# Send signal sig (KILL, STOP, CONT, ...) to the processes pids, by the
# shell's own kill, so that no package (procps) is needed; without the
# sanitizer runtime of RMQ_PRELOAD, which the shell dies of under TSan. A
# process already gone is an error the caller may catch; a signal that
# could not be sent at all ends the program at once, as a test waiting on a
# process it failed to stop would otherwise hang to its time limit.
proc signal_process {sig args} {
  set kill {s=$1; shift; kill -s "$s" "$@"}
  if {[catch {exec env -u LD_PRELOAD sh -c $kill sh $sig {*}[concat {*}$args]} why]} {
    if {![string match "*No such process*" $why]} {
      puts "signal_process: cannot send SIG$sig to $args: $why"
      exit 1
    }
    error $why
  }
}

proc load_rmq {dbh} {
  $dbh enable_load_extension 1
  set ext $::rmq_ext
  $dbh eval {SELECT load_extension($ext)}
}

# A store of small files, whose tests size records by their bodies: bodies
# are stored as given (compress_over=0) unless the test says otherwise.
proc small_store {dir args} {
  set a "dir='$dir', commitlog_file_size=65536, consumequeue_entries=64"
  append a ", index_slots=64, index_entries=256"
  if {![string match *compress_over* $args]} { append a ", compress_over=0" }
  foreach x $args { append a ", $x" }
  return $a
}

proc execsql {sql {dbh db}} {
  uplevel 1 [list $dbh eval $sql]
}

proc catchsql {sql {dbh db}} {
  set rc [catch {uplevel 1 [list $dbh eval $sql]} r]
  list $rc $r
}

# Record the outcome of test $name.
proc rmq_check {name result expected} {
  if {[regexp {^~?/.*/$} $expected]} {
    set re [string range [string trimleft $expected ~] 1 end-1]
    set ok [regexp -- $re $result]
    if {[string index $expected 0] eq "~"} { set ok [expr {!$ok}] }
  } elseif {[regexp {^~?\*.*\*$} $expected]} {
    set ok [string match [string trimleft $expected ~] $result]
    if {[string index $expected 0] eq "~"} { set ok [expr {!$ok}] }
  } else {
    set ok [expr {$result eq $expected}]
  }
  if {$ok} {
    incr ::nPass
    puts "$name... Ok"
  } else {
    incr ::nFail
    lappend ::failList $name
    puts "$name... FAILED"
    puts "  got:      \[$result\]"
    puts "  expected: \[$expected\]"
  }
  flush stdout
}

proc rmq_error {name msg} {
  incr ::nFail
  lappend ::failList $name
  puts "$name... FAILED"
  puts "  error:    $msg"
  flush stdout
}

proc do_test {name script expected} {
  if {[catch {uplevel 1 $script} result]} {
    rmq_error $name $result
    return
  }
  rmq_check $name $result $expected
}

proc do_execsql_test {name sql expected} {
  if {[catch {uplevel 1 [list db eval $sql]} result]} {
    rmq_error $name $result
    return
  }
  if {![regexp {^~?[/*]} $expected]} { set expected [list {*}$expected] }
  rmq_check $name $result $expected
}

proc do_catchsql_test {name sql expected} {
  set rc [catch {uplevel 1 [list db eval $sql]} r]
  rmq_check $name [list $rc $r] [list {*}$expected]
}

# Trim every line and drop the empty ones.
proc rmq_lines {text} {
  set out {}
  foreach line [split $text \n] {
    set line [string trim $line]
    if {$line ne ""} { lappend out $line }
  }
  join $out \n
}

proc do_eqp_test {name sql expected} {
  if {[catch {uplevel 1 [list db eval "EXPLAIN QUERY PLAN $sql"]} rows]} {
    rmq_error $name $rows
    return
  }
  set details {}
  foreach {id parent notused detail} $rows { lappend details $detail }
  rmq_check $name [rmq_lines [join $details \n]] [rmq_lines $expected]
}

proc finish_test {} {
  catch {db close}
  foreach d $::tmpdirs { catch {file delete -force -- $d} }
  if {$::nFail} { puts "failed: $::failList" }
  puts "tests: $::nPass passed, $::nFail failed; checks: 0 passed, 0 failed"
  flush stdout
  exit [expr {$::nFail ? 1 : 0}]
}

set ::testdir [tmpdir]
sqlite3 db [file join $::testdir test.db]
load_rmq db
