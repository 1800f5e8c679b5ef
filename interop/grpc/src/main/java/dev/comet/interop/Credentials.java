package dev.comet.interop;

import org.apache.rocketmq.client.apis.ClientConfigurationBuilder;
import org.apache.rocketmq.client.apis.StaticSessionCredentialsProvider;

/**
 * The ACL account of a run: with GRPC_ACCESS_KEY (and GRPC_SECRET_KEY) set in the environment,
 * every request of the client is signed with it; otherwise requests go unsigned.
 */
final class Credentials {
    private Credentials() {
    }

    /** Adds the environment's account, if any, to {@code config}; returns {@code config}. */
    static ClientConfigurationBuilder fromEnvironment(ClientConfigurationBuilder config) {
        String accessKey = System.getenv("GRPC_ACCESS_KEY");
        if (accessKey != null && !accessKey.isEmpty()) {
            config.setCredentialProvider(
                new StaticSessionCredentialsProvider(accessKey, System.getenv("GRPC_SECRET_KEY")));
        }
        return config;
    }
}
