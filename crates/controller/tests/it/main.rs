//! Integration tests of the controller: real quorums on loopback, brokers played by a
//! remoting client sending what an Apache broker in controller mode sends.

mod quorum;
