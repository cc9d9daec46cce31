package io.gpusched.service.adversarial.restart;

import io.gpusched.core.GpuConfig;
import io.gpusched.core.ServiceSettings;
import io.gpusched.core.UserQuotas;
import io.gpusched.testing.LocalUsers;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.stream.Stream;

/** What the stop's attack tests share: a node without quotas whose jobs get a short kill grace, a user's own dir. */
public final class Restarts {
    private Restarts() {
    }

    /** @return a node's config: no quotas, no admin group of a real user, jobs killed {@code killGrace} after TERM */
    public static GpuConfig config(Duration killGrace) {
        return GpuConfig.builder().users(UserQuotas.none()).service(ServiceSettings.defaults()
                .withAdminGroup("gsu-nonexistent").withKillGrace(killGrace)).build();
    }

    /** @return a working directory of {@code user}'s own under {@code tmp} (a job's cwd must be the caller's) */
    public static Path homeOf(Path tmp, LocalUsers.User user) throws IOException {
        Path home = tmp.resolve("home-" + user.name());
        if (!Files.isDirectory(home)) { // once per user: a test may ask again
            Files.createDirectories(home);
            LocalUsers.Result r = LocalUsers.run(List.of("/bin/chown", user.uid() + ":" + user.gid(), home.toString()),
                    30);
            if (r.exit() != 0) {
                throw new IOException("chown " + home + ": " + r.err());
            }
        }
        return home;
    }

    /** @return the job cgroups ({@code job-*}) under a launcher's parent, none when it is not there */
    public static List<Path> jobCgroups(Path parent) throws IOException {
        if (!Files.isDirectory(parent)) {
            return List.of();
        }
        try (Stream<Path> s = Files.list(parent)) {
            return s.filter(p -> p.getFileName().toString().startsWith("job-") && Files.isDirectory(p)).toList();
        }
    }
}
