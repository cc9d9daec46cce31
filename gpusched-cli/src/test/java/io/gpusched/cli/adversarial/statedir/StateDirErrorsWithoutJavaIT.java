package io.gpusched.cli.adversarial.statedir;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.cli.adversarial.JarRun;
import java.nio.file.Path;
import java.security.SecureRandom;
import java.util.HexFormat;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * Issue 36, rough edges: "Errors that leak Java: FileAlreadyExistsException for a state dir that is a file, FIFO or
 * dangling symlink; AccessDeniedException; ...". A state directory the operating system refuses to create for
 * another reason than permission (EPERM on sysfs, ENOENT on procfs, as EROFS would on a read-only file system) is
 * still reported with the Java exception's class name: {@code gpusched: IO: cannot create the state directory
 * /sys/x: java.nio.file.FileSystemException: /sys/x: Operation not permitted}.
 */
@Tag("adversarial")
class StateDirErrorsWithoutJavaIT {
    @TempDir
    Path tmp;

    @ParameterizedTest
    @ValueSource(strings = {"/sys", "/proc"})
    void aStateDirectoryTheSystemWillNotCreateIsRefusedWithoutJavaNames(String under) throws Exception {
        String dir = under + "/gpusched-test-" + HexFormat.of().formatHex(new SecureRandom().generateSeed(4));
        JarRun.Result r = JarRun.run(tmp, "--simulate", "dgx1-v100", "--state-dir", dir, "allocate", "--gpu=1");
        assertThat(r.exit()).as(r.err()).isNotZero();
        assertThat(r.errLines()).as(r.err()).hasSize(1);
        assertThat(r.errLines().get(0)).startsWith("gpusched: ").contains(dir);
        assertThat(r.err()).as("the refusal names a Java class").doesNotContain("java.").doesNotContain("Exception");
    }
}
