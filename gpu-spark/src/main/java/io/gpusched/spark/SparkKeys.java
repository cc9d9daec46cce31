package io.gpusched.spark;

/** How the Spark components of one JVM name their holdings in {@link io.gpusched.core.host.ProcessGpus}. */
final class SparkKeys {
    static final String WORKER = "spark.worker";
    static final String DRIVER = "spark.driver";
    static final String EXECUTOR = "spark.executor";

    private SparkKeys() {
    }

    /**
     * @param component  Spark's component name ({@code spark.driver}, {@code spark.executor}, {@code spark.worker})
     * @param resource   the resource name
     * @param discovering the thread that discovers
     * @return {@code <component>/<resource>}, and for a Worker {@code @<thread name>#<thread id>} after it
     */
    static String key(String component, String resource, Thread discovering) {
        String k = component + "/" + resource;
        return component.equals(WORKER) ? k + "@" + discovering.getName() + "#" + discovering.getId() : k;
    }

    /** @return the prefix of every key of {@code component} */
    static String prefix(String component) {
        return component + "/";
    }
}
