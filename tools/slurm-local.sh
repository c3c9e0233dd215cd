#!/usr/bin/env bash
# A Slurm cluster of K nodes on this one machine (Debian slurm-wlm + munge), for tests and
# CI, without systemd.
#
#   tools/slurm-local.sh start|stop|status      (as root)
#
# Nodes n1..nK each run their own slurmd (`slurmd -N n<i>`, its own port, spool and pid
# file), all at 127.0.0.1. Each slurmd runs in its own UTS namespace whose host name is its
# node name, so a task on n2 sees `hostname` = n2, as on a real cluster; /etc/hosts maps
# n1..nK to 127.0.0.1. `srun -N2 --ntasks-per-node=2 ...` then places two tasks on each of
# n1 and n2 (SLURM_NODELIST=n[1-2]), and one-node jobs keep working unchanged.
#
# start is idempotent: it installs what is missing, (re)writes /etc/slurm/slurm.conf,
# starts only the daemons that are not running and returns once every node is idle.
# Files touched: /etc/slurm, /etc/munge, /run/munge, /etc/hosts and $SLURM_LOCAL_STATE.
#
# Environment:
#   SLURM_LOCAL_NODES  K, the number of nodes            (default 2)
#   SLURM_LOCAL_STATE  state, spool, logs, pid files     (default /var/tmp/slurm-local)
#   SLURM_LOCAL_CPUS   CPUs each node advertises         (default max(4, nproc))
#   SLURM_LOCAL_MIN_JOB_AGE  seconds a finished job stays known (default 5)
set -euo pipefail

STATE=${SLURM_LOCAL_STATE:-/var/tmp/slurm-local}
NCPU=$(nproc)
CPUS=${SLURM_LOCAL_CPUS:-$(( NCPU > 4 ? NCPU : 4 ))}
# `sbatch --wait` polls every 2 s but multiplies that by 4 (2, 8, 32 ... s) while
# it is below MinJobAge/2; 5 is the largest value that keeps it at 2 s and still
# keeps finished jobs long enough for the poll to see their exit code.
MIN_JOB_AGE=${SLURM_LOCAL_MIN_JOB_AGE:-5}
K=${SLURM_LOCAL_NODES:-2}
[[ $K =~ ^[1-9][0-9]?$ ]] || { echo "slurm-local: SLURM_LOCAL_NODES=$K: use 1..99" >&2; exit 2; }
NODES=()
for (( i = 1; i <= K; i++ )); do NODES+=("n$i"); done
NODELIST=n[1-$K]
(( K > 1 )) || NODELIST=n1
CTLD_HOST=$(hostname -s)
BASE_PORT=17001  # slurmd of n<i> listens on BASE_PORT + i - 1
CONF=/etc/slurm/slurm.conf
PIDS=$STATE/run
HOSTS_TAG="# tools/slurm-local.sh"

say() { echo "slurm-local: $*" >&2; }

# pid_of NAME: print the pid recorded in $PIDS/NAME.pid if that process still runs as the
# daemon NAME names (slurmd-n2 -> slurmd; guards against stale files and recycled pids).
pid_of() {
  local f=$PIDS/$1.pid pid
  [[ -s $f ]] || return 1
  pid=$(<"$f")
  [[ $pid =~ ^[0-9]+$ && -r /proc/$pid/comm && $(</proc/"$pid"/comm) == "${1%%-*}" ]] || return 1
  echo "$pid"
}

# retry N CMD...: run CMD every 0.25 s until it succeeds, at most N times.
retry() {
  local n=$1; shift
  until "$@"; do (( --n > 0 )) || return 1; sleep 0.25; done
}

ensure_packages() {
  local missing=() cmd
  for cmd in slurmctld slurmd sbatch munged; do
    command -v "$cmd" >/dev/null || missing+=("$cmd")
  done
  (( ${#missing[@]} )) || return 0
  say "installing slurmctld slurmd slurm-client munge (missing: ${missing[*]})"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends slurmctld slurmd slurm-client munge >/dev/null
}

# Write slurm.conf; returns 0 if its content changed.
write_conf() {
  local mem_mb override="" new nodes="" i
  # Advertise a bit less memory than present: slurmd drains a node that has
  # less RealMemory than configured. Every node sees the whole machine's memory.
  mem_mb=$(awk '/^MemTotal:/ { print int($2 / 1024 * 0.9) }' /proc/meminfo)
  for (( i = 1; i <= K; i++ )); do
    nodes+="NodeName=n$i NodeHostname=n$i NodeAddr=127.0.0.1 Port=$(( BASE_PORT + i - 1 ))"
    nodes+=" CPUs=$CPUS RealMemory=$mem_mb State=UNKNOWN"$'\n'
  done
  # Without config_overrides slurmd refuses to register more CPUs than it finds.
  if (( CPUS > NCPU )); then override="SlurmdParameters=config_overrides"; fi
  new=$(cat <<CONF
# Written by tools/slurm-local.sh - changes are overwritten on the next start.
ClusterName=local
SlurmctldHost=$CTLD_HOST(127.0.0.1)
SlurmUser=root
AuthType=auth/munge
StateSaveLocation=$STATE/ctld
# %n: the node name, so the slurmd of every node keeps its own files.
SlurmdSpoolDir=$STATE/spool/%n
SlurmctldPidFile=$PIDS/slurmctld.pid
SlurmdPidFile=$PIDS/slurmd-%n.pid
SlurmctldLogFile=$STATE/log/slurmctld.log
SlurmdLogFile=$STATE/log/slurmd-%n.log
# No cgroups (no systemd): track processes via /proc, no task binding.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
MpiDefault=none
MailProg=/bin/true
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
# Run the scheduler every second (default 60 s), so a job whose dependency was
# just satisfied (e.g. --dependency=after:<running job>) starts right away.
SchedulerParameters=sched_interval=1,bf_interval=1
# Bring the node back by itself after slurmd restarts.
ReturnToService=2
MinJobAge=$MIN_JOB_AGE
KillWait=5
InactiveLimit=0
$override
${nodes}PartitionName=local Nodes=$NODELIST Default=YES MaxTime=INFINITE State=UP
CONF
)
  [[ -f $CONF && $(<"$CONF") == "$new" ]] && return 1
  mkdir -p /etc/slurm
  printf '%s\n' "$new" >"$CONF"
  chmod 644 "$CONF"
}

ctld_up()     { scontrol ping 2>/dev/null | grep -q UP; }
queue_empty() { [[ -z $(squeue -h -o %i 2>/dev/null) ]]; }
munge_works() { munge -n </dev/null 2>/dev/null | unmunge >/dev/null 2>&1; }

start_munge() {
  munge_works && return 0   # ours, or one somebody else runs: either is fine
  if [[ ! -s /etc/munge/munge.key ]]; then
    mungekey --create --keyfile=/etc/munge/munge.key
    chown munge:munge /etc/munge/munge.key
    chmod 400 /etc/munge/munge.key
  fi
  install -d -o munge -g munge -m 755 /run/munge
  install -d -o munge -g munge -m 700 "$STATE/munge"
  # Log and seed go to our state folder instead of /var/log and /var/lib.
  runuser -u munge -- munged --force \
    --log-file="$STATE/munge/munged.log" --seed-file="$STATE/munge/munged.seed"
  retry 40 munge_works || { say "munged does not answer; see $STATE/munge/munged.log"; return 1; }
  cp /run/munge/munged.pid "$PIDS/munged.pid"   # remember that we own this one
}

# stop_daemon NAME: TERM the daemon we started, KILL it after 10 s.
stop_daemon() {
  local pid
  pid=$(pid_of "$1") || { rm -f "$PIDS/$1.pid"; return 0; }
  say "stopping $1 ($pid)"
  kill -TERM "$pid" 2>/dev/null || true
  retry 40 test ! -d "/proc/$pid" || kill -KILL "$pid" 2>/dev/null || true
  rm -f "$PIDS/$1.pid"
}

# node_state NODE: its state as sinfo prints it (idle, idle*, down*, ...).
node_state() { sinfo -h -n "$1" -o %T 2>/dev/null; }

# Ready = slurmd has registered and the node takes jobs; "idle*" (trailing *)
# means slurmctld still waits to hear from slurmd.
node_ready() { [[ $(node_state "$1") =~ ^(idle|mixed|allocated|completing)$ ]]; }

all_ready() {
  local node
  for node in "${NODES[@]}"; do node_ready "$node" || return 1; done
}

# all_settle: 0 once every node is ready; puts nodes left down/drained by an earlier
# run back in service.
all_settle() {
  local node rc=0
  for node in "${NODES[@]}"; do
    node_ready "$node" && continue
    rc=1
    if [[ $(node_state "$node") =~ ^(down|drain) ]]; then
      scontrol update NodeName="$node" State=RESUME >/dev/null 2>&1 || true
    fi
  done
  return $rc
}

# ensure_hosts: n1..nK resolve to 127.0.0.1 (Lightning and the runners take MASTER_ADDR
# from the first name of SLURM_NODELIST; gloo resolves each rank's host name).
ensure_hosts() {
  local line="127.0.0.1 ${NODES[*]} $HOSTS_TAG" rest
  grep -qxF "$line" /etc/hosts && return 0
  rest=$(grep -vF "$HOSTS_TAG" /etc/hosts || true)
  # /etc/hosts may be a bind mount (containers): rewrite it in place, never replace it.
  printf '%s\n%s\n' "$rest" "$line" >/etc/hosts
}

# start_slurmd NODE: slurmd for NODE in a UTS namespace whose host name is NODE, so its
# tasks see the node's name as their host name (without one, every task would say this
# machine's name and nothing could tell the nodes apart).
start_slurmd() {
  pid_of "slurmd-$1" >/dev/null && return 0
  if unshare --uts true 2>/dev/null; then
    # shellcheck disable=SC2016  # $1 is the inner shell's
    unshare --uts sh -c 'hostname "$1" && exec slurmd -N "$1"' sh "$1"
  else
    say "no UTS namespace here: tasks on $1 will see host name $(hostname -s)"
    slurmd -N "$1"
  fi
}

# stop_slurmds: every slurmd we started, for any node count (pid files slurmd-<node>.pid,
# and slurmd.pid from the one-node version of this tool).
stop_slurmds() {
  local f
  for f in "$PIDS"/slurmd*.pid; do
    [[ -e $f ]] || continue
    f=${f##*/}
    stop_daemon "${f%.pid}"
  done
}

start() {
  local node
  ensure_packages
  mkdir -p "$STATE"/{ctld,spool,log,run}
  ensure_hosts
  if write_conf; then
    # Running daemons would keep the old node definitions.
    stop_slurmds; stop_daemon slurmctld
  fi
  start_munge
  pid_of slurmctld >/dev/null || slurmctld
  retry 120 ctld_up \
    || { say "slurmctld not up; see $STATE/log/slurmctld.log"; return 1; }
  for node in "${NODES[@]}"; do start_slurmd "$node"; done
  retry 240 all_settle || {
    say "nodes not all idle; see $STATE/log"
    sinfo -N >&2; sinfo -R >&2
    return 1
  }
  sinfo -N
}

stop() {
  # Cancel jobs first so slurmd can reap their steps before it goes.
  if pid_of slurmctld >/dev/null && ! queue_empty; then
    squeue -h -o %i | xargs -r scancel 2>/dev/null || true
    retry 40 queue_empty || true
  fi
  stop_slurmds
  stop_daemon slurmctld
  stop_daemon munged   # only if we started it (pid file in $PIDS)
}

status() {
  local d rc=0
  for d in munged slurmctld "${NODES[@]/#/slurmd-}"; do
    printf '%-11s %s\n' "$d" "$(pid_of "$d" || echo 'not running (or not started by us)')"
  done
  sinfo -N 2>/dev/null || rc=1
  all_ready || rc=1
  return $rc
}

case ${1:-} in
  start|stop|status)
    [[ $(id -u) == 0 ]] || { say "must run as root"; exit 1; }
    "$1" ;;
  *) echo "usage: $0 start|stop|status" >&2; exit 2 ;;
esac
