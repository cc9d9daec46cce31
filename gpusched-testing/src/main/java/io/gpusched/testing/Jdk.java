package io.gpusched.testing;

import java.lang.reflect.InvocationTargetException;
import java.util.Optional;
import javax.security.auth.Subject;

/** What the running JDK can host, for tests of engines that do not run on every JDK. */
public final class Jdk {
    private Jdk() {
    }

    /**
     * Whether Hadoop's {@code UserGroupInformation} (Hadoop 3.4, in the YARN NodeManager and Spark's Hadoop client)
     * can run here: it calls {@code Subject.getSubject}, which throws {@code UnsupportedOperationException} from JDK
     * 23 on (unless {@code -Djava.security.manager=allow}) and always from JDK 24 (JEP 486; HADOOP-19212 changes
     * Hadoop after 3.4.2). Probed by calling it, not by the version.
     *
     * @return empty where it runs; else why a test that starts Hadoop's services is skipped here
     */
    public static Optional<String> hadoopUgiUnavailable() {
        try {
            Class<?> controller = Class.forName("java.security.AccessController");
            Object context = controller.getMethod("getContext").invoke(null);
            Subject.class.getMethod("getSubject", Class.forName("java.security.AccessControlContext"))
                    .invoke(null, context);
            return Optional.empty();
        } catch (InvocationTargetException e) {
            if (e.getCause() instanceof UnsupportedOperationException) {
                return Optional.of("Hadoop 3.4's UserGroupInformation cannot run on JDK " + Runtime.version()
                        + ": Subject.getSubject throws UnsupportedOperationException (\"" + e.getCause().getMessage()
                        + "\"; JEP 486, HADOOP-19212); gpusched's YARN and Spark plug-ins run where their engine runs,"
                        + " and this test runs on JDK 17");
            }
            return Optional.empty(); // another failure: the test meets it itself
        } catch (ReflectiveOperationException e) {
            return Optional.of("Subject.getSubject is not in JDK " + Runtime.version() + ": " + e);
        }
    }
}
