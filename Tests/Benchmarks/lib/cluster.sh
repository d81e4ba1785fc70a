# Sourced by the benchmark scripts that start a cluster with services/run-cluster.sh in the background.

# wait_for_cluster LOG PID: returns once run-cluster.sh (PID, writing LOG) says "Kindred is up"; if it exits
# first, or is not up within 2 minutes, prints its log and exits 1.
wait_for_cluster() {
    for _ in $(seq 600); do
        grep -q "Kindred is up" "$1" && return 0
        kill -0 "$2" 2>/dev/null || break
        sleep 0.2
    done
    cat "$1"
    exit 1
}
