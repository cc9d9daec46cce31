package io.gpusched.client;

import java.time.Duration;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;

/**
 * A job to run on the node's GPUs ({@code POST /api/v1/jobs}): what to allocate, the command, and the environment and
 * working directory it starts with. The node service runs it as the caller (the kernel's uid, never a field of this),
 * fenced to its GPUs.
 *
 * @param flags the request, in the command's flags ({@code --gpu=2}, {@code --gpu-memory=8GB}, ...)
 * @param cuda  a CUDA requirement for the job's environment ({@code >=12.1}), if any
 * @param argv  the command and its arguments
 * @param env   the environment to start it with (device selectors are replaced by the allocation's)
 * @param cwd   the working directory (entered as the caller, so only one the caller may enter works)
 * @param maxWait how long to queue for busy GPUs; empty: refuse at once when they are busy
 */
public record JobSpec(List<String> flags, Optional<String> cuda, List<String> argv, Map<String, String> env,
        String cwd, Optional<Duration> maxWait) {

    /**
     * Copies the collections.
     *
     * @throws IllegalArgumentException when argv is empty
     */
    public JobSpec {
        flags = List.copyOf(flags);
        Objects.requireNonNull(cuda, "cuda");
        argv = List.copyOf(argv);
        if (argv.isEmpty()) {
            throw new IllegalArgumentException("a job needs a command: argv is empty");
        }
        env = Collections.unmodifiableMap(new LinkedHashMap<>(env));
        Objects.requireNonNull(cwd, "cwd");
        Objects.requireNonNull(maxWait, "maxWait");
    }
}
