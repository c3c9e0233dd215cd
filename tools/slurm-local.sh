#!/usr/bin/env bash
# One-node Slurm cluster (Debian slurm-wlm + munge) for tests and CI, without systemd.
#
#   tools/slurm-local.sh start|stop|status      (as root)
#
# start is idempotent: it installs what is missing, (re)writes /etc/slurm/slurm.conf,
# starts only the daemons that are not running and returns once the node is idle.
# Files touched: /etc/slurm, /etc/munge, /run/munge and $SLURM_LOCAL_STATE.
#
# Environment:
#   SLURM_LOCAL_STATE  state, spool, logs, pid files   (default /var/tmp/slurm-local)
#   SLURM_LOCAL_CPUS   CPUs the node advertises        (default max(4, nproc))
#   SLURM_LOCAL_MIN_JOB_AGE  seconds a finished job stays known (default 5)
set -euo pipefail

STATE=${SLURM_LOCAL_STATE:-/var/tmp/slurm-local}
NCPU=$(nproc)
CPUS=${SLURM_LOCAL_CPUS:-$(( NCPU > 4 ? NCPU : 4 ))}
# `sbatch --wait` polls every 2 s but multiplies that by 4 (2, 8, 32 ... s) while
# it is below MinJobAge/2; 5 is the largest value that keeps it at 2 s and still
# keeps finished jobs long enough for the poll to see their exit code.
MIN_JOB_AGE=${SLURM_LOCAL_MIN_JOB_AGE:-5}
NODE=$(hostname -s)
CONF=/etc/slurm/slurm.conf
PIDS=$STATE/run

say() { echo "slurm-local: $*" >&2; }

# pid_of NAME: print the pid recorded for daemon NAME if that process still runs
# under that name (guards against stale pid files and recycled pids).
pid_of() {
  local f=$PIDS/$1.pid pid
  [[ -s $f ]] || return 1
  pid=$(<"$f")
  [[ $pid =~ ^[0-9]+$ && -r /proc/$pid/comm && $(</proc/"$pid"/comm) == "$1" ]] || return 1
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
  local mem_mb override="" new
  # Advertise a bit less memory than present: slurmd drains a node that has
  # less RealMemory than configured.
  mem_mb=$(awk '/^MemTotal:/ { print int($2 / 1024 * 0.9) }' /proc/meminfo)
  # Without config_overrides slurmd refuses to register more CPUs than it finds.
  if (( CPUS > NCPU )); then override="SlurmdParameters=config_overrides"; fi
  new=$(cat <<CONF
# Written by tools/slurm-local.sh - changes are overwritten on the next start.
ClusterName=local
SlurmctldHost=$NODE(127.0.0.1)
SlurmUser=root
AuthType=auth/munge
StateSaveLocation=$STATE/ctld
SlurmdSpoolDir=$STATE/spool
SlurmctldPidFile=$PIDS/slurmctld.pid
SlurmdPidFile=$PIDS/slurmd.pid
SlurmctldLogFile=$STATE/log/slurmctld.log
SlurmdLogFile=$STATE/log/slurmd.log
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
NodeName=$NODE NodeAddr=127.0.0.1 CPUs=$CPUS RealMemory=$mem_mb State=UNKNOWN
PartitionName=local Nodes=$NODE Default=YES MaxTime=INFINITE State=UP
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

node_state() { sinfo -h -n "$NODE" -o %T 2>/dev/null; }

# Ready = slurmd has registered and the node takes jobs; "idle*" (trailing *)
# means slurmctld still waits to hear from slurmd.
node_ready() { [[ $(node_state) =~ ^(idle|mixed|allocated|completing)$ ]]; }

node_settle() {
  node_ready && return 0
  # A node left down/drained by an earlier run: put it back in service.
  if [[ $(node_state) =~ ^(down|drain) ]]; then
    scontrol update NodeName="$NODE" State=RESUME >/dev/null 2>&1 || true
  fi
  return 1
}

start() {
  ensure_packages
  mkdir -p "$STATE"/{ctld,spool,log,run}
  if write_conf; then
    # Running daemons would keep the old node definition.
    stop_daemon slurmd; stop_daemon slurmctld
  fi
  start_munge
  pid_of slurmctld >/dev/null || slurmctld
  retry 120 ctld_up \
    || { say "slurmctld not up; see $STATE/log/slurmctld.log"; return 1; }
  pid_of slurmd >/dev/null || slurmd
  retry 240 node_settle \
    || { say "node $NODE not idle (state: $(node_state || true)); see $STATE/log"; sinfo -R >&2; return 1; }
  sinfo
}

stop() {
  # Cancel jobs first so slurmd can reap their steps before it goes.
  if pid_of slurmctld >/dev/null && ! queue_empty; then
    squeue -h -o %i | xargs -r scancel 2>/dev/null || true
    retry 40 queue_empty || true
  fi
  stop_daemon slurmd
  stop_daemon slurmctld
  stop_daemon munged   # only if we started it (pid file in $PIDS)
}

status() {
  local d rc=0
  for d in munged slurmctld slurmd; do
    printf '%-9s %s\n' "$d" "$(pid_of "$d" || echo 'not running (or not started by us)')"
  done
  sinfo 2>/dev/null || rc=1
  node_ready || rc=1
  return $rc
}

case ${1:-} in
  start|stop|status)
    [[ $(id -u) == 0 ]] || { say "must run as root"; exit 1; }
    "$1" ;;
  *) echo "usage: $0 start|stop|status" >&2; exit 2 ;;
esac
