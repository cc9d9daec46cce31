package io.gpusched.slurm;

import java.util.HashSet;
import java.util.Objects;
import java.util.Optional;
import java.util.OptionalLong;
import java.util.Set;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * The Slurm job (and step) a process runs in, as its cgroup path says: Slurm's cgroup plugins put every process of a
 * job step in {@code job_<id>/step_<step>} below a root of their own.
 * <ul>
 *   <li>cgroup v1 ({@code cgroup/v1}, {@code task/cgroup}, {@code proctrack/cgroup}): in each controller's hierarchy,
 *       {@code /slurm/uid_<uid>/job_<id>/step_<step>/...} ({@code /slurm_<node>/...} with multiple slurmd);</li>
 *   <li>cgroup v2 ({@code cgroup/v2}, Slurm 22.05 and later):
 *       {@code /system.slice/slurmstepd.scope/job_<id>/step_<step>/...} ({@code <node>_slurmstepd.scope} with
 *       multiple slurmd; the scope directly under the root where slurmd runs without systemd or in a cgroup
 *       namespace).</li>
 * </ul>
 * Only a path that starts at Slurm's root counts: a {@code job_5} cgroup a user made in a subtree delegated to them
 * (their {@code user@.service}, or below their own step) names no job. The first {@code job_<id>} below the root is the
 * job, however deep the path goes. Where lines of one process disagree (v1 controllers in different jobs), the process
 * is attributed to no job.
 *
 * @param jobId         the job id, 1 to 4294967294 (as Slurm writes it: no array or het notation)
 * @param step          the step ({@code 0}, {@code 1.0}, {@code batch}, {@code extern}, {@code interactive}), where the
 *                      path goes that deep
 * @param uid           the job's uid (cgroup v1 paths carry it)
 * @param cgroupVersion 1 or 2
 */
public record SlurmJobStep(long jobId, Optional<String> step, OptionalLong uid, int cgroupVersion) {
    /** Most bytes of {@code /proc/<pid>/cgroup} read: far more than any real one holds. */
    public static final int MAX_INPUT = 64 * 1024;

    /** Largest job id Slurm gives ({@code NO_VAL} - 1). */
    public static final long MAX_JOB_ID = 0xFFFFFFFEL;

    private static final String ID = "([1-9][0-9]{0,9})";
    private static final String STEP = "(?:/step_([0-9]{1,10}(?:\\.[0-9]{1,10})?|batch|extern|interactive))?";
    private static final Pattern V1 = Pattern.compile(
            "^/slurm(?:_[^/]{1,255})?/uid_(0|[1-9][0-9]{0,9})/job_" + ID + STEP + "(?:/.*)?$");
    private static final Pattern LINE = Pattern.compile("^(0|[1-9][0-9]{0,4}):([^:]*):(/.*)$");
    private static final Set<String> SLURM_V1_CONTROLLERS = Set.of("freezer", "cpuset", "memory", "devices", "cpu",
            "cpuacct");
    private static final Pattern V2 = Pattern.compile(
            "^(?:/system\\.slice)?/(?:[^/]{1,255}_)?slurmstepd\\.scope/job_" + ID + STEP + "(?:/.*)?$");

    /** @throws IllegalArgumentException for a job id outside 1 to {@link #MAX_JOB_ID} or a version not 1 or 2 */
    public SlurmJobStep {
        if (jobId < 1 || jobId > MAX_JOB_ID) {
            throw new IllegalArgumentException("Slurm job id must be 1 to " + MAX_JOB_ID + ", was " + jobId);
        }
        Objects.requireNonNull(step, "step");
        Objects.requireNonNull(uid, "uid");
        if (cgroupVersion != 1 && cgroupVersion != 2) {
            throw new IllegalArgumentException("cgroup version must be 1 or 2, was " + cgroupVersion);
        }
    }

    /**
     * Reads the job of a process from the text of its {@code /proc/<pid>/cgroup} ({@code hierarchy:controllers:path}
     * lines). Never throws. Empty when the text names no Slurm job, names two, or is not shaped as the kernel writes
     * it: every line {@code <id>:<controllers>:/<path>}, each hierarchy id and each controller once. Defence in
     * depth: were a cgroup name to hold a newline, a user could nest {@code x\\n0::} and
     * {@code system.slice/slurmstepd.scope/job_5} in a subtree delegated to them and make their process's file show a
     * second line naming another's job. The kernel refuses such names (mkdir answers EINVAL, checked on Linux 6.18 for
     * v1 and v2); the check stays for kernels that did not and for trees that are not the kernel's. A v1 line counts
     * only for the controllers Slurm's plugins use (freezer, cpuset, memory, devices, cpu, cpuacct), which appear once
     * in a real file.
     *
     * @param procCgroup the file's text (only its first {@value #MAX_INPUT} characters are read)
     * @return the job step, or empty
     */
    public static Optional<SlurmJobStep> fromProcCgroup(String procCgroup) {
        if (procCgroup == null || procCgroup.isEmpty()) {
            return Optional.empty();
        }
        String text = procCgroup.length() > MAX_INPUT ? procCgroup.substring(0, MAX_INPUT) : procCgroup;
        if (text.endsWith("\n")) {
            text = text.substring(0, text.length() - 1);
        }
        Set<String> hierarchies = new HashSet<>();
        Set<String> controllersSeen = new HashSet<>();
        SlurmJobStep found = null;
        for (String line : text.split("\n", -1)) {
            Matcher l = LINE.matcher(line);
            if (!l.matches() || !hierarchies.add(l.group(1))) {
                return Optional.empty(); // not the kernel's shape: forged through a cgroup name
            }
            String controllers = l.group(2);
            boolean slurmController = false;
            if (!controllers.isEmpty()) {
                for (String c : controllers.split(",", -1)) {
                    if (c.isEmpty() || !controllersSeen.add(c)) {
                        return Optional.empty();
                    }
                    slurmController |= SLURM_V1_CONTROLLERS.contains(c);
                }
            }
            boolean v2 = controllers.isEmpty() && l.group(1).equals("0");
            if (!v2 && !slurmController) {
                continue;
            }
            String path = l.group(3);
            if (path.endsWith(" (deleted)")) {
                path = path.substring(0, path.length() - " (deleted)".length());
            }
            SlurmJobStep s = match(path, v2);
            if (s == null) {
                continue;
            }
            if (found != null && found.jobId() != s.jobId()) {
                return Optional.empty(); // a process Slurm placed in one job is not in two
            }
            if (found == null || found.step().isEmpty()) {
                found = s;
            }
        }
        return Optional.ofNullable(found);
    }

    private static SlurmJobStep match(String path, boolean v2) {
        Matcher m = (v2 ? V2 : V1).matcher(path);
        if (!m.matches()) {
            return null;
        }
        int g = v2 ? 1 : 2;
        long job = Long.parseLong(m.group(g));
        if (job > MAX_JOB_ID) {
            return null;
        }
        OptionalLong uid = OptionalLong.empty();
        if (!v2) {
            long u = Long.parseLong(m.group(1));
            if (u > 0xFFFFFFFEL) {
                return null;
            }
            uid = OptionalLong.of(u);
        }
        return new SlurmJobStep(job, Optional.ofNullable(m.group(g + 1)), uid, v2 ? 2 : 1);
    }
}
