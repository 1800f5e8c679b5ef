//! What every builder of the crate shares: the [`ClientConfig`](crate::ClientConfig) options
//! (name servers, instance name, namespace, ACL credentials, TLS, RPC timeout), written once
//! and stamped into each builder by [`client_options!`].

/// Adds the client options to a builder whose `ClientConfig` is at `self.$path`.
macro_rules! client_options {
    ($($path:ident).+) => {
        /// The name server addresses, `;`-separated (Java `namesrvAddr`).
        pub fn namesrv(mut self, addr: impl Into<String>) -> Self {
            self.$($path).+.namesrv_addr = addr.into();
            self
        }

        /// Replaces every client setting at once (the name servers included).
        pub fn client_config(mut self, client: $crate::config::ClientConfig) -> Self {
            self.$($path).+ = client;
            self
        }

        /// The instance name, the second part of the client id (Java `instanceName`). Clients
        /// of one process with the same id share one client instance.
        pub fn instance_name(mut self, name: impl Into<String>) -> Self {
            self.$($path).+.instance_name = name.into();
            self
        }

        /// A resource namespace: topics and groups become `namespace%name` on the brokers.
        pub fn namespace(mut self, namespace: impl Into<String>) -> Self {
            self.$($path).+.namespace = Some(namespace.into());
            self
        }

        /// Signs every request with these ACL credentials (RocketMQ's `AclClientRPCHook`).
        pub fn credentials(mut self, credentials: $crate::SessionCredentials) -> Self {
            self.$($path).+.credentials = Some(credentials);
            self
        }

        /// Connects to name servers and brokers over TLS.
        pub fn tls(mut self, tls: $crate::config::ClientTls) -> Self {
            self.$($path).+.tls = Some(tls);
            self
        }

        /// Timeout of the client's RPCs other than sends (Java `mqClientApiTimeout`).
        pub fn rpc_timeout(mut self, timeout: std::time::Duration) -> Self {
            self.$($path).+.mq_client_api_timeout = timeout;
            self
        }
    };
}

pub(crate) use client_options;
