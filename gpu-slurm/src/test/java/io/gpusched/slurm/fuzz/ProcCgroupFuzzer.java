package io.gpusched.slurm.fuzz;

import io.gpusched.slurm.SlurmJobStep;
import java.nio.charset.StandardCharsets;
import java.util.Optional;
import java.util.regex.Pattern;

/**
 * Fuzz target for {@link SlurmJobStep#fromProcCgroup} (the text of {@code /proc/<pid>/cgroup}), for the JUnit
 * regression run ({@link SlurmCgroupFuzzTest}) and the standalone campaign ({@code .ci/fuzz procCgroup}): it never
 * throws, and a job it names is one the text spells below Slurm's root, checked here with a pattern of this target's
 * own (not the parser's): the text holds {@code /job_<id>} right after {@code slurmstepd.scope} (v2) or after
 * {@code /uid_<n>} (v1), the id without leading zeros and at most 4294967294.
 */
public final class ProcCgroupFuzzer {
    private static final Pattern SPELLED = Pattern.compile("(slurmstepd\\.scope|/uid_[0-9]+)/job_([0-9]+)");

    private ProcCgroupFuzzer() {
    }

    /** One input: the file's text (ISO-8859-1, as the attribution reads it). */
    public static void fuzzerTestOneInput(byte[] input) {
        String text = new String(input, StandardCharsets.ISO_8859_1);
        Optional<SlurmJobStep> s = SlurmJobStep.fromProcCgroup(text);
        if (s.isEmpty()) {
            return;
        }
        long id = s.get().jobId();
        if (id < 1 || id > SlurmJobStep.MAX_JOB_ID) {
            throw new AssertionError("job id out of range: " + id);
        }
        boolean spelled = SPELLED.matcher(text).results().anyMatch(m -> m.group(2).equals(Long.toString(id)));
        if (!spelled) {
            throw new AssertionError("job " + id + " is not spelled below a Slurm root in " + text);
        }
        if (s.get().step().isPresent() && !text.contains("/job_" + id + "/step_" + s.get().step().get())) {
            throw new AssertionError("step " + s.get().step().get() + " is not spelled after job " + id);
        }
    }
}
