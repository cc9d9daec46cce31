package io.gpusched.yarn;

import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.util.Collection;
import java.util.HashMap;
import java.util.Map;
import java.util.Optional;
import java.util.function.Supplier;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.yarn.server.nodemanager.containermanager.linux.resources.CGroupsHandler;
import org.apache.hadoop.yarn.server.nodemanager.containermanager.linux.resources.ResourceHandlerModule;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Which containers YARN still counts as holding devices on this node, read from their devices cgroups. In Hadoop 3.4
 * the device framework's {@code DeviceResourceHandlerImpl} makes {@code <devices hierarchy>/<container id>} in
 * {@code preStart}, right after it assigned the container's devices (and asked this plug-in to choose them), and
 * removes it in {@code postComplete}, right after it gave the devices back in its own books. So a container's cgroup
 * exists exactly while YARN holds devices for it: from just after {@code allocateDevices} until the container is
 * cleaned up, across a NodeManager restart with recovery (recovered containers keep their cgroups; those that ended
 * meanwhile are cleaned up by the recovered NodeManager), whether or not YARN asks for GPUs again.
 *
 * <p>The hierarchy is YARN's own ({@code ResourceHandlerModule.getCGroupsHandler()}, the handler the
 * LinuxContainerExecutor initialised), or the directory given in {@link GpuschedDevicePlugin#KEY_CONTAINER_CGROUPS}.
 * When neither is there (no LinuxContainerExecutor, or the devices controller is not mounted), or the hierarchy
 * directory does not exist, nothing is said: {@link #look} answers empty and no record is released for a missing
 * cgroup.
 */
final class ContainerCgroups {
    private static final Logger LOG = LoggerFactory.getLogger(ContainerCgroups.class);

    /** Where YARN makes one cgroup per container; empty when it cannot be seen now. */
    private final Supplier<Optional<Path>> hierarchy;
    private volatile String lastProblem;

    ContainerCgroups(Supplier<Optional<Path>> hierarchy) {
        this.hierarchy = hierarchy;
    }

    /** @return the view for a NodeManager's configuration: the explicit directory, else YARN's own handler */
    static ContainerCgroups of(Configuration conf) {
        String given = conf.getTrimmed(GpuschedDevicePlugin.KEY_CONTAINER_CGROUPS, "");
        if (!given.isEmpty()) {
            Path p = Path.of(given);
            if (!p.isAbsolute()) {
                throw new IllegalArgumentException(GpuschedDevicePlugin.KEY_CONTAINER_CGROUPS + " = \"" + given
                        + "\" is not an absolute path; expected the devices hierarchy where YARN makes one cgroup per"
                        + " container, such as /sys/fs/cgroup/devices/hadoop-yarn, or nothing (YARN's own)");
            }
            return new ContainerCgroups(() -> Optional.of(p));
        }
        return new ContainerCgroups(ContainerCgroups::yarnsOwn);
    }

    /** @return the devices hierarchy of the NodeManager's cgroups handler, if this JVM runs one that has it */
    static Optional<Path> yarnsOwn() {
        try {
            CGroupsHandler h = ResourceHandlerModule.getCGroupsHandler();
            if (h == null || h.getControllerPath(CGroupsHandler.CGroupController.DEVICES) == null) {
                return Optional.empty();
            }
            Path p = Path.of(h.getPathForCGroup(CGroupsHandler.CGroupController.DEVICES, "x")).getParent();
            return Optional.ofNullable(p);
        } catch (LinkageError | RuntimeException e) { // not in a NodeManager, or another Hadoop
            return Optional.empty();
        }
    }

    /** @return where the view looks now, if anywhere */
    Optional<Path> hierarchy() {
        return hierarchy.get();
    }

    /**
     * @param containerIds YARN container ids (anything else is answered "present": never released for lack of a
     *                     cgroup)
     * @return for each id whether its cgroup exists, or empty when the hierarchy cannot be seen (nothing may be
     *         concluded)
     */
    Optional<Map<String, Boolean>> look(Collection<String> containerIds) {
        Optional<Path> h = hierarchy.get();
        if (h.isEmpty()) {
            problem("YARN's devices cgroups cannot be seen from this JVM (no LinuxContainerExecutor with the devices"
                    + " controller, and " + GpuschedDevicePlugin.KEY_CONTAINER_CGROUPS + " is not set)");
            return Optional.empty();
        }
        Path root = h.get();
        if (!Files.isDirectory(root, LinkOption.NOFOLLOW_LINKS)) {
            problem("the devices hierarchy " + root + " where YARN makes one cgroup per container is not a"
                    + " directory");
            return Optional.empty();
        }
        lastProblem = null;
        Map<String, Boolean> out = new HashMap<>();
        for (String id : containerIds) {
            out.put(id, !YarnContainerGpus.isContainerId(id) || Files.exists(root.resolve(id),
                    LinkOption.NOFOLLOW_LINKS));
        }
        return Optional.of(out);
    }

    /** Logs a reason the view is blind once (not every tick), at INFO: records are then released as before. */
    private void problem(String why) {
        if (!why.equals(lastProblem)) {
            lastProblem = why;
            LOG.info("gpusched: {}; finished containers' records are released when YARN offers their GPUs again",
                    why);
        }
    }
}
