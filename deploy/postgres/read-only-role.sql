-- The read API's role (`rating-worker serve`): it may log in and SELECT, nothing else. The workers and the
-- migrations keep their own role, which owns the tables. psql runs this file (it uses psql's variables):
--
--   psql "postgresql://postgres@db/ratings" -v ON_ERROR_STOP=1 -v owner=rating \
--        -v reader_password='...' -f deploy/postgres/read-only-role.sql
--
-- Variables, all optional:
--   reader           the role to create (default rating_reader)
--   reader_password  its password (default: the environment's RATING_READER_PASSWORD, psql 15+; none: the
--                    role logs in only as pg_hba.conf allows without one, e.g. by certificate)
--   owner            the role that runs `rating-worker migrate` and so owns the tables (default: whoever
--                    runs this file, as in Compose's init, where that role then migrates)
--   schema           the schema of the tables (default public)
--
-- Run it in the ratings database, before or after the migrations: SELECT on the tables already there, and
-- default privileges so that the tables and views later migrations create (as `owner`) are readable too.
-- Running it again changes nothing but the password. deploy/docker-compose.yml runs it at PostgreSQL's
-- first start; tests/deploy/test_read_only_role.py runs it, migrates, and serves the API with the role.

\if :{?reader}
\else
  \set reader rating_reader
\endif
\if :{?owner}
\else
  SELECT current_user AS owner \gset
\endif
\if :{?schema}
\else
  \set schema public
\endif
\if :{?reader_password}
\else
  \getenv reader_password RATING_READER_PASSWORD
\endif

SELECT format('CREATE ROLE %I LOGIN', :'reader')
 WHERE NOT EXISTS (SELECT FROM pg_roles WHERE rolname = :'reader') \gexec

\if :{?reader_password}
  -- not echoed: psql shows ALTER ROLE only
  ALTER ROLE :"reader" LOGIN PASSWORD :'reader_password';
\endif
-- Sessions are read-only even if a client forgets to ask (the API asks too), and never superuser-like.
ALTER ROLE :"reader" NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION;
ALTER ROLE :"reader" SET default_transaction_read_only = on;

SELECT format('GRANT CONNECT ON DATABASE %I TO %I', current_database(), :'reader') \gexec
GRANT USAGE ON SCHEMA :"schema" TO :"reader";
-- Tables and views (a view is a table to GRANT): leaderboard, published_changes, ...
GRANT SELECT ON ALL TABLES IN SCHEMA :"schema" TO :"reader";
ALTER DEFAULT PRIVILEGES FOR ROLE :"owner" IN SCHEMA :"schema" GRANT SELECT ON TABLES TO :"reader";
