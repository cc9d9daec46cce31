package io.gpusched.core.host;

import io.gpusched.core.GpuRequest;
import io.gpusched.core.GpuRequests;
import io.gpusched.core.internal.Printable;
import java.io.IOException;
import java.net.InetAddress;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.LinkedHashSet;
import java.util.Locale;
import java.util.Set;

/**
 * The names this node answers to, for a target {@code HOST::I,J}: gpusched allocates this node's GPUs only, so a
 * target naming another node is refused rather than read as indices here (the command, the console and the node
 * service apply the same rule).
 */
public final class NodeNames {
    private NodeNames() {
    }

    /** @return this node's names: the kernel's host name, its short form, the resolver's name for it, localhost */
    public static Set<String> names() {
        Set<String> names = new LinkedHashSet<>();
        try {
            names.add(Files.readString(Path.of("/proc/sys/kernel/hostname"), StandardCharsets.US_ASCII).strip());
        } catch (IOException | RuntimeException e) {
            // not Linux, or no /proc: the resolver's name below
        }
        try {
            names.add(InetAddress.getLocalHost().getHostName());
        } catch (IOException e) {
            // no resolver entry for this host: the kernel's name above
        }
        Set<String> all = new LinkedHashSet<>();
        for (String n : names) {
            if (!n.isEmpty()) {
                all.add(n.toLowerCase(Locale.ROOT));
                int dot = n.indexOf('.');
                if (dot > 0) {
                    all.add(n.substring(0, dot).toLowerCase(Locale.ROOT));
                }
            }
        }
        all.add("localhost");
        return all;
    }

    /**
     * @param request a request, as {@link GpuRequests#fromCliFlags} made it
     * @return {@code request} when its target names no host or this node
     * @throws IllegalArgumentException naming the target's host and this node's names, when it names another node
     */
    public static GpuRequest requireLocalTarget(GpuRequest request) {
        String host = request.labels().get(GpuRequests.TARGET_HOST_LABEL);
        if (host == null) {
            return request;
        }
        Set<String> names = names();
        if (names.contains(host.toLowerCase(Locale.ROOT))) {
            return request;
        }
        String self = names.iterator().next();
        throw new IllegalArgumentException("--target names node \"" + Printable.escape(host) + "\", but this is node \""
                + self + "\" (also " + String.join(", ", names.stream().skip(1).toList()) + "): gpusched allocates"
                + " this node's GPUs only; give ::I,J or " + self + "::I,J, or run gpusched on "
                + Printable.escape(host));
    }
}
