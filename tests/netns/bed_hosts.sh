# Sourced by scripts that run inside testbed.sh: bed_hosts N prints hooprun's -H value for N
# ranks, one per namespace of the bed ("ns1:1,ns2:1"), or fails naming the shortfall.
bed_hosts() {
  local n=$1 hosts="" count=0 ns
  for ns in $TESTBED_NS; do
    ((count < n)) || break
    hosts+="${hosts:+,}$ns:1"
    count=$((count + 1))
  done
  ((count == n)) || { echo "the test bed has fewer than $n hosts" >&2; return 2; }
  echo "$hosts"
}
