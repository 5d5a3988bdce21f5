#!/usr/bin/env python3
# score.py - scores one run of run_one.sh (bench/autoscale/README in
# bench/README.md, "Autoscaling policies"): prints one tab-separated line
#   decisions flaps t_opt_s over_pct over_inst_s backlog_s max_behind_s rescale_ms drained_s
# and writes DIR/plot.dat (t offered need p_count behind_s) for the plot.
#
#   score.py DIR COST_US WORDS CAP FLAP_S [CATCH_UP_S]
#
# With a fifth column in the samples (a Redis source's lag, run_one.sh
# --redis), the backlog is that lag, need includes draining it within
# CATCH_UP_S (ceil((arrival + lag / CATCH_UP_S) x WORDS x COST_US / 1e6)),
# and drained_s is when the lag first fell to 1 s of arrivals.
#
# need(t)     the feasible optimum: the fewest count instances that carry
#             the offered load, ceil(lines/s x WORDS x COST_US / 1e6),
#             at least 1, at most CAP (hot key, cores: more cannot help).
# decisions   applied changes of count's parallelism.
# flaps       applied changes reversing the previous one within FLAP_S.
# t_opt_s     per change of need, the seconds until count's parallelism was
#             first >= need; the mean over the changes ("-" none; "never"
#             if one phase never got there).
# over        instance-seconds above need, and their share of all.
# backlog_s   seconds the job was more than 1 s of arrivals behind the
#             schedule (lines offered so far minus lines read).
# rescale_ms  the rescales' time, request to completion, as the controller
#             logged it ("rescaled ... in N ms"), summed.
import math, re, sys

d, cost_us, words, cap, flap_s = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5])
catch_up_s = float(sys.argv[6]) if len(sys.argv) > 6 else 0.0

def rows(path):
    with open(path) as f:
        return [list(map(float, l.split())) for l in f if l.strip() and not l.startswith('#')]

s = rows(d + '/samples.dat')
# While a rescale redeploys the source, its instances may report no
# offered rate (0): the schedule did not change, carry the last one.
for i in range(1, len(s)):
    if s[i][1] == 0 and s[i - 1][1] > 0:
        s[i][1] = s[i - 1][1]
dec = [r for r in rows(d + '/decisions.dat') if r[3] == 1]

def need_of(offered, lag=-1):
    if lag >= 0 and catch_up_s > 0:
        offered += lag / catch_up_s
    n = math.ceil(offered * words * cost_us / 1e6 - 1e-9)
    return max(1, min(n, cap))

def lag_of(row):
    return row[4] if len(row) > 4 else -1

over = total = backlog_s = max_behind = 0.0
offered_sum = None
plot = []
drained = None
has_lag = any(lag_of(r) >= 0 for r in s)
if has_lag:  # a sample without the lag (an instance not reporting): the last one
    last = -1
    for r in s:
        if len(r) > 4 and r[4] >= 0:
            last = r[4]
        elif len(r) > 4:
            r[4] = last
behind = 0.0
for i, row in enumerate(s):
    t, offered, read, p = row[:4]
    lag = lag_of(row)
    need = need_of(offered, lag)
    if i > 0:
        dt = t - s[i - 1][0]
        offered_sum += s[i - 1][1] * dt
        over += max(0.0, s[i - 1][3] - need_of(s[i - 1][1], lag_of(s[i - 1]))) * dt
        total += s[i - 1][3] * dt
    else:
        offered_sum = read  # the first sample: whatever was read is on time
    if lag >= 0:
        behind = lag / offered if offered > 0 else 0.0
        if drained is None and behind <= 1.0:
            drained = t
    elif has_lag:
        pass  # no lag known yet
    else:
        behind = max(0.0, offered_sum - read) / offered if offered > 0 else 0.0
    if i > 0 and behind > 1.0:
        backlog_s += t - s[i - 1][0]
    max_behind = max(max_behind, behind)
    plot.append((t, offered, need, p, behind))

# changes of need and how long until p >= need
changes = []
for i in range(1, len(plot)):
    if plot[i][2] != plot[i - 1][2]:
        changes.append(i)
times, never = [], False
for k, i in enumerate(changes):
    end = changes[k + 1] if k + 1 < len(changes) else len(plot)
    need = plot[i][2]
    hit = next((j for j in range(i, end) if plot[j][3] >= need), None)
    if hit is None:
        never = True
    else:
        times.append(plot[hit][0] - plot[i][0])
if never:
    t_opt = 'never'
elif times:
    t_opt = '%.1f' % (sum(times) / len(times))
else:
    t_opt = '-'

flaps = 0
for a, b in zip(dec, dec[1:]):
    if (a[2] - a[1]) * (b[2] - b[1]) < 0 and b[0] - a[0] <= flap_s:
        flaps += 1

pause = 0
try:
    with open(d + '/local.log', errors='replace') as f:
        for l in f:
            m = re.search(r'rescaled \S+ to \d+ in (\d+) ms', l)
            if m:
                pause += int(m.group(1))
except OSError:
    pass

with open(d + '/plot.dat', 'w') as f:
    f.write('# t offered_lines_s need p_count behind_s\n')
    for r in plot:
        f.write('%.2f %.0f %d %d %.2f\n' % r)
pct = 100.0 * over / total if total else 0.0
drained_s = ('%.0f' % drained if drained is not None else 'never') if has_lag else '-'
print('%d\t%d\t%s\t%.0f\t%.0f\t%.0f\t%.1f\t%d\t%s' % (len(dec), flaps, t_opt, pct, over, backlog_s, max_behind, pause, drained_s))
