package io.gpusched.cli.commands;

import io.gpusched.cli.ThisNode;
import io.gpusched.core.GpuRequest;
import io.gpusched.core.GpuRequests;
import java.util.ArrayList;
import java.util.List;
import picocli.CommandLine.Option;

/** The request flags shared by allocate and run; turned into {@link GpuRequests#fromCliFlags} input. */
public final class RequestFlags {
    @Option(names = "--gpu", paramLabel = "N", description = "GPU count")
    Integer gpu;
    @Option(names = "--gpu-memory", paramLabel = "SIZE", description = "minimum memory per GPU (8GB)")
    String memory;
    @Option(names = "--min-cc", paramLabel = "X.Y", description = "minimum compute capability")
    String minCc;
    @Option(names = "--vendor", description = "nvidia or amd")
    String vendor;
    @Option(names = "--model", paramLabel = "GLOB", description = "GPU name glob (*A100*)")
    String model;
    @Option(names = "--devices", paramLabel = "I,J", description = "explicit GPU indices")
    String devices;
    @Option(names = "--target", paramLabel = "HOST::I,J", description = "host and GPU indices (node1::0,2)")
    String target;
    @Option(names = "--shared", paramLabel = "SIZE", description = "share GPUs, reserving SIZE on each")
    String shared;
    @Option(names = "--owner", description = "who asks (default: you; through the node service, only an admin may"
            + " name another)")
    String owner;
    @Option(names = "--job", description = "job id")
    String job;
    @Option(names = "--label", paramLabel = "K=V", description = "label, repeatable")
    List<String> labels;
    @Option(names = "--lease", paramLabel = "DURATION", description = "allocation expires after this (2h)")
    String lease;

    /**
     * @return the request these flags describe, parsed by {@link GpuRequests#fromCliFlags} (the owner, when not given,
     *         is this process's user)
     * @throws io.gpusched.cli.CliException when {@code --target} names another node
     */
    public GpuRequest request() {
        List<String> f = new ArrayList<>(flags());
        if (owner == null) {
            add(f, "--owner", System.getProperty("user.name"));
        }
        return ThisNode.requireLocalTarget(GpuRequests.fromCliFlags(f));
    }

    /**
     * @return the flags as given, each {@code --name=value} (no {@code --owner} unless given: the node service takes
     *         the caller's own name, and a local ledger this process's user)
     */
    public List<String> flags() {
        List<String> f = new ArrayList<>();
        add(f, "--gpu", gpu == null ? null : String.valueOf(gpu));
        add(f, "--gpu-memory", memory);
        add(f, "--min-cc", minCc);
        add(f, "--vendor", vendor);
        add(f, "--model", model);
        add(f, "--devices", devices);
        add(f, "--target", target);
        add(f, "--shared", shared);
        add(f, "--owner", owner);
        add(f, "--job", job);
        if (labels != null) {
            labels.forEach(l -> add(f, "--label", l));
        }
        add(f, "--lease", lease);
        return f;
    }

    private static void add(List<String> f, String flag, String value) {
        if (value != null) {
            f.add(flag + "=" + value);
        }
    }
}
