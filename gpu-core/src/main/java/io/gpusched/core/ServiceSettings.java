package io.gpusched.core;

import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Objects;
import java.util.Optional;

/**
 * The node service's settings ({@code gpu.service}; see {@code docs/SERVICE.md}). The service reads them; clients read
 * {@link #socket()} to find it.
 *
 * @param socket          the Unix socket the service listens on (default {@value #DEFAULT_SOCKET})
 * @param socketGroup     only this group may connect (socket mode 0660); empty: any local user (0666)
 * @param adminGroup      members may act on anyone's allocations and jobs, drain and undrain; root always may
 * @param loginCgroups    cgroups whose processes (logins, cron, ssh) may open no GPU device node while the service
 *                        runs; empty: off
 * @param jobCgroupParent where job cgroups are made; empty: {@code gpusched.jobs} at the root of cgroup2 (else of the
 *                        v1 devices hierarchy)
 * @param killGrace       how long a job has between TERM and KILL when it is cancelled or its client goes
 * @param jobGroup        a group every job gets as an extra supplementary group (and no login has): with the
 *                        driver's {@code NVreg_DeviceFileMode=0660} and {@code NVreg_DeviceFileGID} of this group,
 *                        only jobs open the GPUs (the alternative to {@code login_cgroups}); empty: none
 * @param privateDir      where the service keeps what only it may write (the console token, job output and the
 *                        service's lock, the fences' records, accounting): a directory only root writes, required when
 *                        the state directory is shared with a state group (its members may rename entries there);
 *                        empty: the state directory itself ({@link #privateDir(Path)})
 */
public record ServiceSettings(Path socket, Optional<String> socketGroup, Optional<String> adminGroup,
        List<Path> loginCgroups, Optional<Path> jobCgroupParent, Duration killGrace, Optional<String> jobGroup,
        Optional<Path> privateDir) {

    /** The default socket path. */
    public static final String DEFAULT_SOCKET = "/run/gpusched/gpusched.sock";

    /** @throws GpuConfigException naming the setting that is not valid */
    public ServiceSettings {
        Objects.requireNonNull(socket, "socket");
        Objects.requireNonNull(socketGroup, "socketGroup");
        Objects.requireNonNull(adminGroup, "adminGroup");
        Objects.requireNonNull(jobCgroupParent, "jobCgroupParent");
        Objects.requireNonNull(killGrace, "killGrace");
        Objects.requireNonNull(jobGroup, "jobGroup");
        Objects.requireNonNull(privateDir, "privateDir");
        loginCgroups = List.copyOf(loginCgroups);
        if (!socket.isAbsolute()) {
            throw new GpuConfigException("gpu.service.socket: \"" + socket + "\" is not an absolute path; expected"
                    + " a path such as " + DEFAULT_SOCKET);
        }
        socketGroup.ifPresent(g -> name(g, "gpu.service.socket_group"));
        adminGroup.ifPresent(g -> name(g, "gpu.service.admin_group"));
        jobGroup.ifPresent(g -> name(g, "gpu.service.job_group"));
        for (int i = 0; i < loginCgroups.size(); i++) {
            absolute(loginCgroups.get(i), "gpu.service.login_cgroups[" + i + "]", "/sys/fs/cgroup/user.slice");
        }
        jobCgroupParent.ifPresent(p -> absolute(p, "gpu.service.job_cgroup_parent", "/sys/fs/cgroup/gpusched.jobs"));
        privateDir.ifPresent(p -> {
            if (!p.isAbsolute() || !p.normalize().equals(p) || p.getNameCount() == 0) {
                throw new GpuConfigException("gpu.service.private_dir: \"" + p + "\" is not an absolute, normalized"
                        + " path below the root; expected a directory only root writes, such as"
                        + " /var/lib/gpusched-service");
            }
        });
        if (killGrace.isNegative() || killGrace.compareTo(Duration.ofHours(1)) > 0) {
            throw new GpuConfigException("gpu.service.kill_grace: must be from 0s to 1h, was " + killGrace);
        }
    }

    private static void name(String g, String where) {
        if (!UserQuotas.validName(g)) {
            throw new GpuConfigException(where + ": \"" + g.replaceAll("[^\\x20-\\x7e]", "?") + "\" is not a group"
                    + " name (1 to " + UserQuotas.MAX_NAME + " printable characters, no whitespace, ':' or '/')");
        }
    }

    private static void absolute(Path p, String where, String example) {
        if (!p.isAbsolute() || !p.normalize().equals(p) || p.getNameCount() == 0) {
            throw new GpuConfigException(where + ": \"" + p + "\" is not an absolute, normalized path below the"
                    + " root; expected a cgroup directory such as " + example);
        }
    }

    /** @return the defaults: socket {@value #DEFAULT_SOCKET}, any user may connect, no admin group, no login fence */
    public static ServiceSettings defaults() {
        return new ServiceSettings(Path.of(DEFAULT_SOCKET), Optional.empty(), Optional.empty(), List.of(),
                Optional.empty(), Duration.ofSeconds(10), Optional.empty(), Optional.empty());
    }

    /** @return a copy with another admin group */
    public ServiceSettings withAdminGroup(String group) {
        return new ServiceSettings(socket, socketGroup, Optional.of(group), loginCgroups, jobCgroupParent, killGrace,
                jobGroup, privateDir);
    }

    /** @return a copy with other login cgroups */
    public ServiceSettings withLoginCgroups(List<Path> cgroups) {
        return new ServiceSettings(socket, socketGroup, adminGroup, cgroups, jobCgroupParent, killGrace, jobGroup,
                privateDir);
    }

    /** @return a copy with another job cgroup parent */
    public ServiceSettings withJobCgroupParent(Path parent) {
        return new ServiceSettings(socket, socketGroup, adminGroup, loginCgroups, Optional.of(parent), killGrace,
                jobGroup, privateDir);
    }

    /** @return a copy with another kill grace */
    public ServiceSettings withKillGrace(Duration grace) {
        return new ServiceSettings(socket, socketGroup, adminGroup, loginCgroups, jobCgroupParent, grace, jobGroup,
                privateDir);
    }

    /** @return a copy with another job group */
    public ServiceSettings withJobGroup(String group) {
        return new ServiceSettings(socket, socketGroup, adminGroup, loginCgroups, jobCgroupParent, killGrace,
                Optional.of(group), privateDir);
    }

    /** @return a copy with another socket and socket group */
    public ServiceSettings withSocket(Path path, Optional<String> group) {
        return new ServiceSettings(path, group, adminGroup, loginCgroups, jobCgroupParent, killGrace, jobGroup,
                privateDir);
    }

    /** @return a copy whose private files live in {@code dir} (absolute) */
    public ServiceSettings withPrivateDir(Path dir) {
        return new ServiceSettings(socket, socketGroup, adminGroup, loginCgroups, jobCgroupParent, killGrace, jobGroup,
                Optional.of(dir));
    }

    /**
     * @param stateDir the node's state directory
     * @return where the service keeps its private files: {@link #privateDir()} when set, else {@code stateDir}
     */
    public Path privateDir(Path stateDir) {
        return privateDir.orElse(stateDir);
    }
}
