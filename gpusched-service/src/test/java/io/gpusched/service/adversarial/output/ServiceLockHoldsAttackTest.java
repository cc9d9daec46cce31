package io.gpusched.service.adversarial.output;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.gpusched.core.GpuException;
import io.gpusched.service.NodeService;
import io.gpusched.service.ServiceBed;
import io.gpusched.testing.LocalUsers;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * The one-service-per-state-directory lock ({@code <state>/jobs/service.lock}) seen from another process, as a second
 * {@code gpusched serve} sees it: a probe JVM (a single-file Java program) tries the same kind of lock the service
 * takes ({@code FileChannel.tryLock}: a POSIX record lock) and says whether it got it.
 */
@Tag("adversarial")
@Timeout(value = 3, unit = TimeUnit.MINUTES)
class ServiceLockHoldsAttackTest {
    private static final String PROBE = """
            import java.nio.channels.FileChannel;
            import java.nio.file.Path;
            import java.nio.file.StandardOpenOption;
            public class LockProbe {
                public static void main(String[] a) throws Exception {
                    try (FileChannel c = FileChannel.open(Path.of(a[0]), StandardOpenOption.READ,
                            StandardOpenOption.WRITE)) {
                        System.out.println(c.tryLock() == null ? "BUSY" : "GOT");
                    }
                }
            }
            """;

    private static String probe(Path tmp, Path lock) throws Exception {
        Path src = tmp.resolve("LockProbe.java");
        Files.writeString(src, PROBE);
        String java = Path.of(System.getProperty("java.home"), "bin", "java").toString();
        LocalUsers.Result r = LocalUsers.run(List.of(java, "-Xmx64m", src.toString(), lock.toString()), 120);
        assertThat(r.exit()).as(r.err()).isZero();
        return r.out().strip();
    }

    private static NodeService second(ServiceBed bed, Path stateDir) {
        return NodeService.builder().scheduler(bed.scheduler).config(bed.config).stateDir(stateDir)
                .users(bed.users).jobs(null, "this test runs no jobs").build();
    }

    /** Another process sees the running service's lock held. */
    @Test
    void theRunningServicesLockIsHeldForAnotherProcess(@TempDir Path tmp) throws Exception {
        try (ServiceBed bed = new ServiceBed(tmp, DetachedJobs.config())) {
            bed.start();
            assertThat(probe(tmp, bed.state.resolve("jobs").resolve("service.lock"))).isEqualTo("BUSY");
        }
    }

    /**
     * The state directory named through a symbolic link is the same directory: refused, when it is built (a link is
     * not a directory only the service's user changes: StateDirectory.requirePrivate) or else by the lock.
     */
    @Test
    void aSecondServiceOnALinkToTheStateDirectoryIsRefused(@TempDir Path tmp) throws Exception {
        try (ServiceBed bed = new ServiceBed(tmp, DetachedJobs.config())) {
            bed.start();
            Path link = Files.createSymbolicLink(tmp.resolve("state-link"), bed.state);
            assertThatThrownBy(() -> {
                try (NodeService again = second(bed, link)) {
                    again.start();
                }
            }).isInstanceOf(GpuException.class).hasMessageContaining(link.toString());
        }
    }
}
