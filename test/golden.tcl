# golden.tcl: helpers for the tests that read the golden RocketMQ stores
# (::rmq_golden) through the companion tables. Source it after tester.tcl.
#
#   golden_py SCRIPT        run SCRIPT (Python, any indentation) with `e` the
#                           parsed expected.json and `store(name)` its store
#                           section; returns what it prints
#   rows_text SQL           the rows of SQL, one line each, values joined by |
#                           (NULL is empty)
#   same_rows GOT WANT      "same N" (N lines compared, so that two empty
#                           results do not pass unseen), or the first line
#                           that differs
#   store_fingerprint DIR   every file and directory under DIR with its size,
#                           mtime and sha256: equal before and after a read
#                           proves that nothing was written
#   copy_store NAME         a writable copy of golden store NAME in a tmpdir
#   poke PATH OFFSET HEX    overwrite bytes of a file (a copy!) at OFFSET

proc golden_py {script} {
  set prelude {
import json, sys, textwrap
e = json.load(open(sys.argv[1]))
def store(name): return e["stores"][name]
exec(textwrap.dedent(sys.argv[2]))
}
  # A pipe, so that the output is read as UTF-8 whatever the locale.
  set f [open |[list env PYTHONIOENCODING=utf-8 /usr/bin/python3 -c $prelude \
                   [file join $::rmq_golden expected.json] $script] r]
  fconfigure $f -encoding utf-8
  set out [read $f]
  close $f
  string trimright $out \n
}

proc rows_text {sql {dbh db}} {
  set ::rows_text_out {}
  uplevel 1 [list $dbh eval $sql ::rows_text_row {
    set vals {}
    foreach c $::rows_text_row(*) { lappend vals $::rows_text_row($c) }
    lappend ::rows_text_out [join $vals |]
  }]
  join $::rows_text_out \n
}

proc same_rows {got want} {
  set g [split $got \n]
  set w [split $want \n]
  for {set i 0} {$i < max([llength $g], [llength $w])} {incr i} {
    if {[lindex $g $i] ne [lindex $w $i]} {
      return "line $i of [llength $g] (want [llength $w]): got {[lindex $g $i]} want {[lindex $w $i]}"
    }
  }
  return [list same [llength $g]]
}

proc store_fingerprint {dir} {
  set out {}
  foreach f [lsort [split [exec find $dir -print] \n]] {
    file lstat $f st
    if {$st(type) eq "file"} {
      lappend out [list $f $st(size) $st(mtime) [lindex [exec sha256sum $f] 0]]
    } else {
      lappend out [list $f $st(type) $st(mtime)]
    }
  }
  return $out
}

proc copy_store {name} {
  set d [file join [tmpdir] $name]
  file copy [file join $::rmq_golden $name] $d
  exec chmod -R u+w $d
  return $d
}

proc poke {path offset hex} {
  set f [open $path r+]
  fconfigure $f -translation binary
  seek $f $offset
  puts -nonewline $f [binary format H* $hex]
  close $f
}
